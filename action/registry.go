package action

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	gosync "sync"
)

// Settings is what a plugin's Factory receives to build one instance.
type Settings struct {
	// Instance is the instance's name, as manifests name it.
	Instance string
	// Config is the instance's settings as written in the agent
	// configuration, as JSON; nil or empty when none were written.
	Config json.RawMessage
	// Getenv resolves the environment variables that settings ending in Env
	// name; nil means os.LookupEnv. Tests pass their own so that they need
	// not change the process environment.
	Getenv func(string) (string, bool)
	// Logger is the instance's logger; the Registry never passes nil.
	Logger *slog.Logger
}

// LookupEnv looks name up with Getenv, or in the process environment when
// Getenv is nil.
func (s Settings) LookupEnv(name string) (string, bool) {
	if s.Getenv == nil {
		return os.LookupEnv(name)
	}
	return s.Getenv(name)
}

// DecodeConfig decodes Config into the struct v points at, strictly: a key
// that v does not declare, a value of the wrong type or trailing data is an
// error naming the setting. Absent, empty and null settings leave v as it is,
// so that v's zero values stand for the defaults.
//
// Plugins should decode durations and other parsed values as strings and
// check them afterwards: encoding/json does not say which field a custom
// UnmarshalJSON failed on, and every error must name its setting.
func (s Settings) DecodeConfig(v any) error {
	raw := bytes.TrimSpace(s.Config)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return settingsError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("settings: unexpected data after the settings object")
	}
	return nil
}

// settingsError rewrites encoding/json's errors, which speak of Go types and
// struct fields, in terms of the settings the operator wrote.
func settingsError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return fmt.Errorf("settings must be an object, not %s", typeErr.Value)
		}
		return fmt.Errorf("%s: must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("settings are not valid JSON: %w", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("settings are not valid JSON: they end too early: %w", err)
	}
	// DisallowUnknownFields reports `json: unknown field "name"` and offers
	// no typed error to ask for the name.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown setting %s", name)
	}
	return fmt.Errorf("settings: %w", err)
}

// jsonKind names a Go kind the way a JSON author thinks of it.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "a list"
	case "map", "struct":
		return "an object"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "a number"
	}
	return "a " + kind
}

// Factory builds one instance of a plugin from its settings. It validates
// every setting and resolves every environment variable up front, so that
// a mistake in the agent configuration stops the agent at start instead of
// failing the first reconcile.
type Factory func(s Settings) (Action, error)

// Spec is one action instance as the agent configuration declares it.
type Spec struct {
	// Plugin names the registered plugin that implements the instance.
	Plugin string `json:"plugin"`
	// Config holds the plugin's settings, as JSON.
	Config json.RawMessage `json:"config,omitempty"`
}

// Noop is the name of the built-in plugin that does nothing, and of its
// instance, which always exists.
const Noop = "noop"

// instanceName is what an instance name may look like: it appears in
// manifests, logs and metrics labels, so it is kept to lowercase letters,
// digits and a few separators.
var instanceName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$`)

// ErrUnknownPlugin is wrapped by Build's error for an instance whose plugin
// is not registered.
var ErrUnknownPlugin = errors.New("unknown plugin")

// Registry maps plugin names to their factories. It is safe for concurrent
// use.
type Registry struct {
	mu        gosync.RWMutex
	factories map[string]Factory
}

// NewRegistry returns a registry that holds the built-in plugin noop.
func NewRegistry() *Registry {
	return &Registry{factories: map[string]Factory{Noop: newNoop}}
}

// Register adds a plugin. An empty name, a nil factory or a name already
// registered is an error.
func (r *Registry) Register(plugin string, f Factory) error {
	if plugin == "" {
		return errors.New("register plugin: empty name")
	}
	if f == nil {
		return fmt.Errorf("register plugin %q: nil factory", plugin)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.factories[plugin]; ok {
		return fmt.Errorf("register plugin %q: already registered", plugin)
	}
	r.factories[plugin] = f
	return nil
}

// Plugins returns the names of the registered plugins, sorted.
func (r *Registry) Plugins() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.factories))
}

// Build builds every declared instance, plus the built-in instance noop.
// getenv resolves the variables that settings name (nil means
// os.LookupEnv); log is the parent of each instance's logger (nil discards).
//
// Build reports every problem at once, so that an operator fixes the
// configuration in one pass: the error joins one error per problem, each
// prefixed with "actions.<name>: " like the configuration key it is about.
func (r *Registry) Build(specs map[string]Spec, getenv func(string) (string, bool), log *slog.Logger) (*Instances, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r.mu.RLock()
	factories := maps.Clone(r.factories)
	r.mu.RUnlock()
	known := slices.Sorted(maps.Keys(factories))

	names := slices.Collect(maps.Keys(specs))
	if _, ok := specs[Noop]; !ok {
		names = append(names, Noop)
	}
	slices.Sort(names)

	var problems []error
	instances := &Instances{byName: make(map[string]Instance, len(names))}
	for _, name := range names {
		fail := func(err error) {
			// A factory may join several problems with errors.Join; prefix
			// each, so that every line of the message says which instance it
			// is about. The newline tells a join from fmt.Errorf("%w: %w"),
			// whose parts make one message and must stay together.
			if joined, ok := err.(interface{ Unwrap() []error }); ok && strings.Contains(err.Error(), "\n") {
				for _, e := range joined.Unwrap() {
					problems = append(problems, fmt.Errorf("actions.%s: %w", name, e))
				}
				return
			}
			problems = append(problems, fmt.Errorf("actions.%s: %w", name, err))
		}
		spec, declared := specs[name]
		switch {
		case name == Noop && declared:
			// Manifests rely on noop doing nothing; letting the configuration
			// point it elsewhere would turn a harmless name into a real one.
			fail(errors.New("the instance noop is built in and cannot be redeclared; give this instance another name"))
			continue
		case name == Noop:
			spec = Spec{Plugin: Noop}
		case !instanceName.MatchString(name):
			fail(fmt.Errorf("invalid instance name %q: use lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or digit", name))
			continue
		case spec.Plugin == "":
			fail(fmt.Errorf("plugin is required (known plugins: %s)", strings.Join(known, ", ")))
			continue
		}
		factory, ok := factories[spec.Plugin]
		if !ok {
			fail(fmt.Errorf("%w %q (known plugins: %s)", ErrUnknownPlugin, spec.Plugin, strings.Join(known, ", ")))
			continue
		}
		a, err := factory(Settings{
			Instance: name,
			Config:   spec.Config,
			Getenv:   getenv,
			Logger:   log.With("action", name),
		})
		if err != nil {
			fail(err)
			continue
		}
		if a == nil {
			fail(fmt.Errorf("plugin %q built no action", spec.Plugin))
			continue
		}
		instances.byName[name] = Instance{Name: name, Plugin: spec.Plugin, Action: a}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return instances, nil
}

// SecretHolder is implemented by actions whose settings read secret
// values (the variables that settings ending in Env name, and the ones an
// exec command is passed). The agent masks every value listed in what it
// writes and serves, since an action may echo one in its messages or
// outputs.
type SecretHolder interface {
	// Secrets returns the secret values the instance read at build time.
	Secrets() []string
}

// Instance is one built action instance.
type Instance struct {
	// Name is the instance's name, as manifests name it.
	Name string
	// Plugin is the plugin that built it.
	Plugin string
	// Action performs the instance's operations.
	Action Action
}

// Instances are the action instances of an agent configuration. They are
// immutable once built and safe for concurrent use.
type Instances struct {
	byName map[string]Instance
}

// Get returns the instance called name or, when there is none, the one
// instance of the plugin called name (see Resolve). The empty name is not
// an alias for anything: what a resource without an action means is the
// caller's choice.
func (in *Instances) Get(name string) (Instance, bool) {
	i, err := in.Resolve(name)
	return i, err == nil
}

// ErrUnknownInstance is what Resolve answers for a name that is neither an
// instance nor the plugin of exactly one.
var ErrUnknownInstance = errors.New("unknown action instance")

// Resolve returns the instance called name or, when there is none, the one
// instance of the plugin called name: the predecessor's resources name a
// plugin (action_plugin: github_actions), and with one instance of it that
// can only mean that instance. Several instances of the plugin, or none,
// fail with ErrUnknownInstance, naming the instances there are.
func (in *Instances) Resolve(name string) (Instance, error) {
	if in != nil {
		if i, ok := in.byName[name]; ok {
			return i, nil
		}
	}
	var of []string
	if in != nil && name != "" {
		for _, i := range in.byName {
			if i.Plugin == name {
				of = append(of, i.Name)
			}
		}
	}
	slices.Sort(of)
	switch len(of) {
	case 1:
		return in.byName[of[0]], nil
	case 0:
		return Instance{}, fmt.Errorf("%w %q (instances: %s)", ErrUnknownInstance, name, strings.Join(in.Names(), ", "))
	}
	return Instance{}, fmt.Errorf("%w %q: it is no instance, and the plugin %s has several (%s): name one",
		ErrUnknownInstance, name, name, strings.Join(of, ", "))
}

// List returns the instances, by name.
func (in *Instances) List() []Instance {
	out := make([]Instance, 0, len(in.Names()))
	for _, name := range in.Names() {
		out = append(out, in.byName[name])
	}
	return out
}

// Secrets returns the secret values of each instance that holds any
// (see SecretHolder), by instance name.
func (in *Instances) Secrets() map[string][]string {
	out := map[string][]string{}
	if in == nil {
		return out
	}
	for name, i := range in.byName {
		if h, ok := i.Action.(SecretHolder); ok {
			if values := h.Secrets(); len(values) > 0 {
				out[name] = slices.Clone(values)
			}
		}
	}
	return out
}

// Names returns the instances' names, sorted.
func (in *Instances) Names() []string {
	if in == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(in.byName))
}
