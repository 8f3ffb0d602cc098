// Package terraform is the action plugin "terraform": it keeps the world
// matching a resource by running an OpenTofu or Terraform module with the
// resource's spec as its variables.
//
// Each resource gets a work folder (workingDir/<instance>/<kind>/<name>: the
// state is keyed by the instance and the resource's identity, see
// statekey.go) holding a copy of the module, the variables generated from the spec, the backend
// configuration and, with the default local backend, the state. Apply plans
// into a file and applies exactly that plan; Destroy destroys what the state
// holds and removes the folder only once that succeeded; Plan runs a plan
// with -detailed-exitcode, so that drift checks re-apply only when the
// module would change something and pull-request previews show the real
// plan.
//
// The plugin drives the binary directly rather than through
// hashicorp/terraform-exec: that library starts the binary with the agent's
// whole environment (which holds the agent's tokens) unless told otherwise
// for each call, and ends a cancelled run by killing it, where a run must
// be interrupted and given time to write its state and release its lock.
// The JSON that the binary writes is read with hashicorp/terraform-json's
// types.
//
// The binary does not inherit the agent's environment: it gets PATH and
// HOME, the fixed values of the env setting, the variables passEnv names
// (credentials, read once at start and masked in everything the agent
// writes), and TF_IN_AUTOMATION, TF_INPUT=0 and CHECKPOINT_DISABLE. The
// spec may not set a variable that the agent sets (no8s_*) or that the
// operator passes as TF_VAR_<name>: such a field is refused, naming it,
// before the binary runs.
//
// Each run has a process group of its own, led on Linux by the supervisor
// of package proc. A cancelled operation (timeout, lost lease, agent
// stopping) sends the group SIGINT and waits up to the interrupt grace for
// the binary to stop, which lets it persist its state and release its
// lock, then kills the group. When the agent dies, even by SIGKILL, the
// supervisor does the same. The group (host, boot id, PID namespace,
// leader's pid and start time) is recorded as the attempt's handle, so that
// the next attempt, on any agent, waits until every process of a previous
// run on this host (and namespace) is gone,
// and may force-unlock a lock only when its holder provably is.
package terraform

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/proc"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/redact"
)

// Plugin is the plugin's name in the agent configuration.
const Plugin = "terraform"

const (
	// DefaultTimeout bounds an apply or a destroy when the settings set no
	// timeout.
	DefaultTimeout = 30 * time.Minute
	// DefaultPlanTimeout bounds a plan when the settings set no planTimeout.
	DefaultPlanTimeout = 10 * time.Minute
	// DefaultWorkingDir is where the work folders are when the settings
	// name no workingDir, relative to the agent's working directory.
	DefaultWorkingDir = ".no8s/terraform"
	// interruptGrace is how long an interrupted binary has to stop by itself
	// (persist its state, release its lock) before its group is killed.
	interruptGrace = 30 * time.Second
	// priorWait bounds how long an operation waits for a previous run of the
	// same resource, still alive on this host, to end.
	priorWait = 2 * time.Minute
)

// settings are the plugin's settings in the agent configuration.
type settings struct {
	// Binary is the program: a path, or a name looked up in PATH. Default
	// tofu, then terraform.
	Binary string `json:"binary"`
	// Module is a folder (relative to the agent's working directory) or a
	// module source string (registry address, git URL, ...).
	Module string `json:"module"`
	// WorkingDir is the root of the per-resource work folders.
	WorkingDir string `json:"workingDir"`
	// Backend is a backend block, such as `backend "pg" { ... }`, as a Go
	// template in which {{ .Key }} is <instance>/<kind>/<name>, and
	// {{ .Instance }}, {{ .Kind }} and {{ .Name }} are its parts: each
	// instance and resource must get its own state key or workspace. Empty:
	// local state in the work folder.
	Backend string `json:"backend"`
	// Env are fixed, non-secret environment variables.
	Env map[string]string `json:"env"`
	// PassEnv names agent environment variables passed to the binary.
	PassEnv []string `json:"passEnv"`
	// Vars are extra variables, under the spec's (the spec wins). None may
	// be a no8s_* variable, nor one that env or passEnv passes.
	Vars map[string]json.RawMessage `json:"vars"`
	// Parallelism is passed as -parallelism when positive.
	Parallelism int `json:"parallelism"`
	// Timeout bounds an apply or a destroy, PlanTimeout a plan.
	Timeout     string `json:"timeout"`
	PlanTimeout string `json:"planTimeout"`
	// PluginCacheDir is TF_PLUGIN_CACHE_DIR: providers downloaded once for
	// every work folder.
	PluginCacheDir string `json:"pluginCacheDir"`
}

// reservedEnv are variables the plugin sets itself.
var reservedEnv = []string{"TF_IN_AUTOMATION", "TF_INPUT", "CHECKPOINT_DISABLE", "TF_PLUGIN_CACHE_DIR", "TF_CLI_ARGS", "TF_DATA_DIR", "TF_WORKSPACE", proc.SupervisorEnv}

// Action is a terraform instance. It is safe for concurrent use: operations
// on different resources use different work folders, and the reconciler
// never runs two operations on one resource at once.
type Action struct {
	instance string
	binary   string // absolute
	module   module
	root     string // absolute workingDir
	backend  *template.Template
	// backendNamespaced is true when the backend template renders a
	// different key for each namespace: only then may it serve resources
	// in namespaces of their own.
	backendNamespaced bool
	env               []string
	secrets           []string
	// masker masks the secrets in output before the plugin cuts it: the
	// agent masks again, but cannot find a piece a cut left.
	masker      *redact.Masker
	vars        map[string]json.RawMessage
	parallelism int
	timeout     time.Duration
	planTimeout time.Duration
	// operatorVars are the variables env and passEnv pass as TF_VAR_<name>,
	// by name, with the setting that does.
	operatorVars map[string]string
	log          *slog.Logger
	// grace is interruptGrace; tests shorten it.
	grace time.Duration
}

var (
	_ action.Action       = (*Action)(nil)
	_ action.Planner      = (*Action)(nil)
	_ action.Timeouter    = (*Action)(nil)
	_ action.SecretHolder = (*Action)(nil)
)

// New builds a terraform instance from its settings. It checks the binary,
// the module, the backend template and the environment, so that a mistake
// stops the agent at start; every error names its setting.
func New(s action.Settings) (action.Action, error) {
	var cfg settings
	if err := s.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Action{instance: s.Instance, timeout: DefaultTimeout, planTimeout: DefaultPlanTimeout,
		parallelism: cfg.Parallelism, vars: cfg.Vars, log: log, grace: interruptGrace}
	var problems []error
	fail := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }

	for _, d := range []struct {
		name, value string
		into        *time.Duration
	}{{"timeout", cfg.Timeout, &a.timeout}, {"planTimeout", cfg.PlanTimeout, &a.planTimeout}} {
		if d.value == "" {
			continue
		}
		v, err := time.ParseDuration(d.value)
		switch {
		case err != nil:
			fail("%s: %q is not a duration such as \"30m\"", d.name, d.value)
		case v <= 0:
			fail("%s: must be positive, not %q", d.name, d.value)
		default:
			*d.into = v
		}
	}
	if cfg.Parallelism < 0 {
		fail("parallelism: must be positive, not %d", cfg.Parallelism)
	}

	bin, err := findBinary(cfg.Binary, s.LookupEnv)
	if err != nil {
		fail("binary: %w", err)
	}
	a.binary = bin

	if cfg.Module == "" {
		fail("module: required: a folder holding the module (relative to the agent's working directory) or a module source such as \"git::https://example.com/modules.git//db?ref=v1.2.0\"")
	} else if a.module, err = newModule(cfg.Module); err != nil {
		fail("module: %w", err)
	}

	root := cfg.WorkingDir
	if root == "" {
		root = DefaultWorkingDir
	}
	if abs, err := filepath.Abs(root); err != nil {
		fail("workingDir: %w", err)
	} else {
		a.root = abs
	}

	if strings.TrimSpace(cfg.Backend) != "" {
		t, err := template.New("backend").Option("missingkey=error").Parse(cfg.Backend)
		if err != nil {
			fail("backend: %w", err)
		} else if namespaced, err := checkBackend(t, s.Instance); err != nil {
			fail("backend: %w", err)
		} else {
			a.backend, a.backendNamespaced = t, namespaced
		}
	}

	a.operatorVars = map[string]string{}
	for _, src := range []struct {
		setting string
		names   []string
	}{{"env", slices.Sorted(maps.Keys(cfg.Env))}, {"passEnv", cfg.PassEnv}} {
		for _, name := range src.names {
			v, ok := strings.CutPrefix(name, "TF_VAR_")
			switch {
			case !ok:
			case strings.HasPrefix(v, agentVarPrefix):
				fail("%s: %s: the agent sets the %s* variables itself", src.setting, name, agentVarPrefix)
			default:
				a.operatorVars[v] = src.setting
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Vars)) {
		switch {
		case !json.Valid(cfg.Vars[name]):
			fail("vars: %s is not a JSON value", name)
		case strings.HasPrefix(name, agentVarPrefix):
			fail("vars: %s: reserved: the agent sets the %s* variables itself", name, agentVarPrefix)
		case a.operatorVars[name] != "":
			fail("vars: %s: also passed as TF_VAR_%s (%s); set it in one place", name, name, a.operatorVars[name])
		}
	}

	vars, secrets, envProblems := s.CommandEnv(cfg.Env, cfg.PassEnv, reservedEnv, "is set by the plugin")
	a.env, a.secrets = append(vars, "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1"), secrets
	a.masker = redact.New(secrets...)
	problems = append(problems, envProblems...)
	if cfg.PluginCacheDir != "" {
		abs, err := filepath.Abs(cfg.PluginCacheDir)
		if err != nil {
			fail("pluginCacheDir: %w", err)
		} else if err := os.MkdirAll(abs, 0o755); err != nil {
			fail("pluginCacheDir: %w", err)
		} else {
			a.env = append(a.env, "TF_PLUGIN_CACHE_DIR="+abs)
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return a, nil
}

// findBinary resolves the binary setting: a path, a name in PATH, or by
// default tofu and then terraform.
func findBinary(name string, lookupEnv func(string) (string, bool)) (string, error) {
	candidates := []string{name}
	if name == "" {
		candidates = []string{"tofu", "terraform"}
	}
	var errs []error
	for _, c := range candidates {
		if strings.Contains(c, "/") {
			abs, err := filepath.Abs(c)
			if err != nil {
				return "", err
			}
			fi, err := os.Stat(abs)
			if err != nil {
				return "", fmt.Errorf("%w: install OpenTofu (https://opentofu.org/docs/intro/install/) or set binary to its path", err)
			}
			if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
				return "", fmt.Errorf("%s is not an executable file", abs)
			}
			return abs, nil
		}
		path, err := lookPath(c, lookupEnv)
		if err == nil {
			return path, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("%w: install OpenTofu (https://opentofu.org/docs/intro/install/) or Terraform, or set binary to its path", errors.Join(errs...))
}

// lookPath looks name up in the PATH that the binary will get.
func lookPath(name string, lookupEnv func(string) (string, bool)) (string, error) {
	path, _ := lookupEnv("PATH")
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0 {
			return filepath.Abs(p)
		}
	}
	return "", fmt.Errorf("%s not found in PATH: %w", name, osexec.ErrNotFound)
}

// backendData is what the backend template is given.
type backendData struct {
	// Key is Instance/Kind/Name, or Instance/Namespace/Kind/Name for a
	// resource in a namespace other than "default", each part a safe path
	// component (see stateKey).
	Key string
	// Namespace is the resource's namespace: "default", another, or none
	// for a cluster-scoped kind.
	Instance, Namespace, Kind, Name string
}

// keyData is the backend template's data for a resource of instance inst.
func keyData(inst, ns, kind, name string) backendData {
	parts := append([]string{inst}, identity(action.Resource{Namespace: ns, Kind: kind, Name: name})...)
	for i, p := range parts {
		parts[i] = encodeComponent(p)
	}
	return backendData{Key: strings.Join(parts, "/"), Instance: inst, Namespace: ns, Kind: kind, Name: name}
}

// render renders the backend template for one key.
func render(t *template.Template, d backendData) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, d); err != nil {
		return "", err
	}
	return b.String(), nil
}

// renderBackend renders the backend template for one resource.
//
// The pg backend keeps the state in the schema schema_name names, and
// PostgreSQL cuts an identifier to its first 63 bytes without a word: two
// resources whose schema names differ past that point (names run to 253
// characters) would share one state, and the one's run would destroy what
// the other made. Such a schema name is refused.
func (a *Action) renderBackend(res action.Resource) (string, error) {
	parts, err := a.stateKey(res)
	if err != nil {
		return "", err
	}
	if !legacyNamespace(res.Namespace) && !a.backendNamespaced {
		return "", fmt.Errorf("the backend template gives %s the state of the same kind and name in every other namespace: "+
			"use {{ .Key }} (<instance>/<namespace>/<kind>/<name> outside the namespace \"default\"), or {{ .Namespace }}", res.Ref())
	}
	out, err := render(a.backend, backendData{Key: strings.Join(parts, "/"), Instance: a.instance, Namespace: res.Namespace, Kind: res.Kind, Name: res.Name})
	if err != nil {
		return "", err
	}
	if regexp.MustCompile(`\bbackend\s+"pg"`).MatchString(out) {
		const maxIdentifier = 63
		for _, m := range regexp.MustCompile(`\bschema_name\s*=\s*"((?:[^"\\]|\\.)*)"`).FindAllStringSubmatch(out, -1) {
			if len(m[1]) > maxIdentifier {
				return "", fmt.Errorf("the pg backend's schema_name for %s, %q, is %d bytes: PostgreSQL keeps the first %d bytes of a schema's name, "+
					"so resources whose names begin alike would share one state; keep schema_name within %d bytes "+
					"(a shorter template; shorter names, such as labels: spec.nameFormat: label), or use a backend whose keys hold the whole name",
					res.Ref(), m[1], len(m[1]), maxIdentifier, maxIdentifier)
			}
		}
	}
	return out, nil
}

// checkBackend renders the backend template for keys that differ in one
// part each: a template that renders two of them alike would give two
// instances, or two resources, one state, and let one's module destroy
// what the other made. It reports whether the key changes with the
// namespace: a template written before namespaces may not, and serves
// then only resources in the namespace "default" (or none).
func checkBackend(t *template.Template, instance string) (namespaced bool, err error) {
	base, err := render(t, keyData(instance, "default", "Kind", "name"))
	if err != nil {
		return false, err
	}
	for _, v := range []struct {
		part string
		data backendData
	}{
		{"instance", keyData(instance+"-other", "default", "Kind", "name")},
		{"kind", keyData(instance, "default", "OtherKind", "name")},
		{"name", keyData(instance, "default", "Kind", "other-name")},
	} {
		got, err := render(t, v.data)
		if err != nil {
			return false, err
		}
		if got == base {
			return false, fmt.Errorf("the state's key or workspace must differ for each instance and resource, and this one does not change with the %s: "+
				"use {{ .Key }} (<instance>/<kind>/<name>), e.g. key = \"no8s/{{ .Key }}.tfstate\"; "+
				"a work folder initialised with an earlier key moves its state to the new one (init -migrate-state) on its next run", v.part)
		}
	}
	// A namespace of its own against another, and against the default
	// one: all three must differ for the template to serve namespaces.
	a, err := render(t, keyData(instance, "team-a", "Kind", "name"))
	if err != nil {
		return false, err
	}
	b, err := render(t, keyData(instance, "team-b", "Kind", "name"))
	if err != nil {
		return false, err
	}
	namespaced = a != b && a != base && b != base
	return namespaced, checkSeparators(t, instance)
}

// instanceNameRE is what the configuration accepts as an instance's name.
var instanceNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$`)

// checkSeparators refuses a template in which two of the identity's parts
// follow each other with a separator that the parts may hold themselves:
// with "{{ .Instance }}-{{ .Name }}", instance tf's "eu-db" and instance
// tf-eu's "db" get one key. It finds where the parts land by rendering
// marker values, then renders the two identities that shift the separator
// from one part into the other: when they render the same, that is the
// proof. (A part the template transforms is not found; the probes of
// checkBackend still apply to it.)
func checkSeparators(t *template.Template, instance string) error {
	type part struct {
		label  string
		marker string
		valid  func(string) bool
	}
	parts := []part{
		{"instance", "zqinstancezq", instanceNameRE.MatchString},
		{"namespace", "zqnamespacezq", manifest.ValidNamespace},
		{"kind", "ZqkindZq", manifest.ValidKindName},
		{"name", "zqnamezq", manifest.ValidName},
	}
	data := func(v [4]string) backendData { return keyData(v[0], v[1], v[2], v[3]) }
	out, err := render(t, data([4]string{parts[0].marker, parts[1].marker, parts[2].marker, parts[3].marker}))
	if err != nil {
		return err
	}
	type occurrence struct{ start, end, part int }
	var occ []occurrence
	for i, p := range parts {
		for from := 0; ; {
			j := strings.Index(out[from:], p.marker)
			if j < 0 {
				break
			}
			occ = append(occ, occurrence{from + j, from + j + len(p.marker), i})
			from += j + len(p.marker)
		}
	}
	slices.SortFunc(occ, func(a, b occurrence) int { return a.start - b.start })
	base := [4]string{instance, "ns", "Kind", "name"}
	if len(instance) > 48 {
		base[0] = "a" // room for a separator and more
	}
	for i := 1; i < len(occ); i++ {
		x, y := occ[i-1], occ[i]
		if x.part == y.part || y.start < x.end {
			continue
		}
		sep := out[x.end:y.start]
		for _, mid := range []string{"m", "M", "1"} {
			// One identity has "…sep mid" at the end of x's part, the other
			// "mid sep…" at the start of y's: the rendered text is alike
			// where the two parts meet.
			left, right := base, base
			left[x.part] += sep + mid
			right[y.part] = mid + sep + right[y.part]
			ok := true
			for k, p := range parts {
				ok = ok && p.valid(left[k]) && p.valid(right[k])
			}
			if !ok {
				continue
			}
			l, err := render(t, data(left))
			if err != nil {
				return err
			}
			r, err := render(t, data(right))
			if err != nil {
				return err
			}
			if l == r {
				between := fmt.Sprintf("at %q", sep)
				if sep == "" {
					between = "with nothing between them"
				}
				return fmt.Errorf("the template renders the same for instance %q, namespace %q, kind %q, name %q and instance %q, namespace %q, kind %q, name %q: "+
					"the %s and the %s meet %s, and the one may end or the other begin with the same; separate them with '/' or use {{ .Key }} (<instance>/<kind>/<name>)",
					left[0], left[1], left[2], left[3], right[0], right[1], right[2], right[3], parts[x.part].label, parts[y.part].label, between)
			}
		}
	}
	return nil
}

// agentVarPrefix starts the names of the variables the plugin sets:
// no8s_kind, no8s_namespace, no8s_name, no8s_generation, and any it may
// set later.
const agentVarPrefix = "no8s_"

// checkSpec refuses a spec that is not an object of variables, or that
// sets a variable the plugin sets (no8s_*) or the operator passes from the
// agent's environment (TF_VAR_<name> in env or passEnv, such as a
// credential): the spec, written as a variables file, would take
// precedence over both. Each field is named by its path.
func (a *Action) checkSpec(res action.Resource) error {
	if len(res.Spec) == 0 || string(res.Spec) == "null" {
		return nil
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(res.Spec, &spec); err != nil {
		return fmt.Errorf("spec: not an object of variables: %w", err)
	}
	var problems []error
	for _, name := range slices.Sorted(maps.Keys(spec)) {
		switch {
		case strings.HasPrefix(name, agentVarPrefix):
			problems = append(problems, fmt.Errorf("spec.%s: reserved: the agent sets the %s* variables itself", name, agentVarPrefix))
		case a.operatorVars[name] != "":
			problems = append(problems, fmt.Errorf("spec.%s: reserved: terraform instance %q passes it from the agent's environment (TF_VAR_%s, in %s); a spec may not override it",
				name, a.instance, name, a.operatorVars[name]))
		}
	}
	return errors.Join(problems...)
}

// Timeout implements action.Timeouter. A plan has its own, shorter bound
// (planTimeout), which Plan applies itself.
func (a *Action) Timeout() time.Duration { return max(a.timeout, a.planTimeout) }

// Secrets implements action.SecretHolder: the passEnv values.
func (a *Action) Secrets() []string { return a.secrets }
