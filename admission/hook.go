package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/no8s/no8s-agent/manifest"
)

// Timeouts of a hook call.
const (
	// DefaultTimeout bounds a call when the hook sets no timeout.
	DefaultTimeout = 10 * time.Second
	// MaxTimeout is the longest timeout a hook may set: every change waits
	// for its hooks, and a sync waits for all its changes.
	MaxTimeout = 30 * time.Second
)

// Section is the key of the hooks in the agent configuration; problems
// that CheckHooks reports start with it.
const Section = "admission"

// HookType says whether a hook may amend what it reviews.
type HookType string

// The types of hook.
const (
	// Validating hooks allow or refuse; they are called after every
	// mutating hook.
	Validating HookType = "validating"
	// Mutating hooks may also return a JSON Patch to the object.
	Mutating HookType = "mutating"
)

// FailurePolicy says what a hook that fails to answer means for the change.
type FailurePolicy string

// The failure policies.
const (
	// Fail refuses the change when the hook fails.
	Fail FailurePolicy = "Fail"
	// Ignore lets the change through, with a warning, when the hook fails.
	Ignore FailurePolicy = "Ignore"
)

// Operation is what is being done to a resource.
type Operation string

// The operations a hook reviews.
const (
	Create Operation = "create"
	Update Operation = "update"
	Delete Operation = "delete"
)

// operations are the known operations, in the order messages list them.
var operations = []Operation{Create, Update, Delete}

// hookNameRE is the rule of action names: hook names appear in logs and in
// messages to people, where spaces and odd characters would blur them.
var hookNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$`)

// Hook is one admission hook as the agent configuration declares it.
type Hook struct {
	// Name identifies the hook in messages and logs; unique.
	Name string `json:"name"`
	// URL receives the reviews: an absolute http or https URL without
	// credentials.
	URL string `json:"url"`
	// Kinds are the resource kinds the hook reviews; empty means all.
	Kinds []string `json:"kinds,omitempty"`
	// Operations are the operations the hook reviews; empty means all.
	Operations []Operation `json:"operations,omitempty"`
	// Type is validating or mutating.
	Type HookType `json:"type"`
	// FailurePolicy is Fail or Ignore; empty means Fail.
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`
	// Timeout bounds one call; zero means DefaultTimeout.
	Timeout Duration `json:"timeout,omitzero"`
	// SecretEnv names the environment variable holding the key that signs
	// the requests; empty sends them unsigned.
	SecretEnv string `json:"secretEnv,omitempty"`
}

// Duration is a time.Duration written as a string with a unit, such as
// "10s", in the configuration.
type Duration struct{ time.Duration }

// UnmarshalJSON accepts a Go duration string. A bare number is refused:
// whether 10 means seconds or nanoseconds is a guess not worth making.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("invalid duration %s: write it with a unit, like \"10s\"", b)
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("invalid duration %q", s)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes the duration as a string that UnmarshalJSON reads back.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// Problem is one thing wrong with a hook's configuration.
type Problem struct {
	// Key is the path of the offending setting: relative to the hook
	// ("url") from Hook.Check, from the configuration's root
	// ("admission[1].url") from CheckHooks.
	Key string
	// Message says what is wrong.
	Message string
}

// String formats the problem as "key: message".
func (p Problem) String() string { return p.Key + ": " + p.Message }

// Check returns every problem of the hook's settings; none means New will
// accept it, as far as the settings go: whether secretEnv is set in the
// environment is New's to find out.
func (h *Hook) Check() []Problem {
	var ps []Problem
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
	}

	switch {
	case h.Name == "":
		add("name", "required")
	case !hookNameRE.MatchString(h.Name):
		add("name", "invalid hook name %q: use lower-case letters, digits, '-' and '_', at most 63, starting and ending with a letter or digit", h.Name)
	}

	if h.URL == "" {
		add("url", "required")
	} else if u, err := url.Parse(h.URL); err != nil {
		add("url", "%q is not a URL", h.URL)
	} else {
		switch {
		case u.Scheme != "http" && u.Scheme != "https":
			add("url", "%q is not an absolute http or https URL", h.URL)
		case u.Host == "":
			add("url", "%q has no host", h.URL)
		case u.User != nil:
			// Credentials would sit in the configuration and show in
			// messages; secretEnv is the way to authenticate the agent.
			add("url", "must not contain credentials; use secretEnv")
		case u.Fragment != "":
			add("url", "must not contain a fragment")
		}
	}

	for i, k := range h.Kinds {
		if !manifest.ValidKindName(k) {
			add(fmt.Sprintf("kinds[%d]", i), "%q is not a kind name such as DatabaseCluster", k)
		}
	}
	for i, op := range h.Operations {
		if !slices.Contains(operations, op) {
			add(fmt.Sprintf("operations[%d]", i), "unknown operation %q (known: create, update, delete)", op)
		}
	}

	switch h.Type {
	case Validating, Mutating:
	case "":
		add("type", "required: validating or mutating")
	default:
		add("type", "must be validating or mutating, not %q", h.Type)
	}

	switch h.FailurePolicy {
	case "", Fail, Ignore:
	default:
		add("failurePolicy", "must be Fail or Ignore, not %q", h.FailurePolicy)
	}

	switch d := h.Timeout.Duration; {
	case d < 0:
		add("timeout", "must be positive, not %s", d)
	case d > MaxTimeout:
		add("timeout", "must be at most %s, not %s", MaxTimeout, d)
	}
	return ps
}

// CheckHooks returns every problem of the hooks' settings, each keyed from
// the configuration's root, like admission[1].url: those of each hook, and
// names used twice.
func CheckHooks(hooks []Hook) []Problem {
	var ps []Problem
	seen := map[string]int{}
	for i := range hooks {
		h := &hooks[i]
		key := fmt.Sprintf("%s[%d]", Section, i)
		for _, p := range h.Check() {
			ps = append(ps, Problem{Key: key + "." + p.Key, Message: p.Message})
		}
		if j, dup := seen[h.Name]; dup && h.Name != "" {
			ps = append(ps, Problem{Key: key + ".name", Message: fmt.Sprintf("duplicate hook name %q (also %s[%d])", h.Name, Section, j)})
		} else {
			seen[h.Name] = i
		}
	}
	return ps
}

// timeout returns the hook's timeout, with the default applied.
func (h *Hook) timeout() time.Duration {
	if h.Timeout.Duration == 0 {
		return DefaultTimeout
	}
	return h.Timeout.Duration
}

// failurePolicy returns the hook's failure policy, with the default applied.
func (h *Hook) failurePolicy() FailurePolicy {
	if h.FailurePolicy == "" {
		return Fail
	}
	return h.FailurePolicy
}

// matches reports whether the hook reviews op on resources of kind.
func (h *Hook) matches(kind string, op Operation) bool {
	return (len(h.Kinds) == 0 || slices.Contains(h.Kinds, kind)) &&
		(len(h.Operations) == 0 || slices.Contains(h.Operations, op))
}
