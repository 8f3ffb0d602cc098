package action

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// envName is what a portable environment variable name looks like.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CommandEnv builds the environment of a program a plugin starts, which
// never inherits the agent's own (it holds the agent's tokens): PATH and
// HOME as the agent has them, then env (fixed, non-secret values, sorted by
// name), then the agent's variables that passEnv names, read now so that a
// missing one is a mistake reported at start, not at the first reconcile.
// reserved are names the plugin sets itself, refused in both settings with
// why. It returns the variables as NAME=value, the values of the passEnv
// variables (secrets, to be masked wherever the agent writes), and one
// error per problem, each naming its setting.
func (s Settings) CommandEnv(env map[string]string, passEnv, reserved []string, why string) (vars, secrets []string, problems []error) {
	fail := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	for _, name := range []string{"PATH", "HOME"} {
		if v, ok := s.LookupEnv(name); ok {
			vars = append(vars, name+"="+v)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		value := env[name]
		switch {
		case !envName.MatchString(name):
			fail("env: %q is not a valid variable name", name)
		case slices.Contains(reserved, name):
			fail("env: %s %s", name, why)
		case slices.Contains(passEnv, name):
			fail("env: %s is also in passEnv; set it in one of them", name)
		case strings.ContainsRune(value, 0):
			fail("env: the value of %s contains a NUL byte", name)
		default:
			vars = append(vars, name+"="+value)
		}
	}
	for i, name := range passEnv {
		switch {
		case !envName.MatchString(name):
			fail("passEnv: %q is not a valid variable name", name)
			continue
		case slices.Contains(reserved, name):
			fail("passEnv: %s %s", name, why)
			continue
		case slices.Contains(passEnv[:i], name):
			fail("passEnv: %s is listed twice", name)
			continue
		}
		value, ok := s.LookupEnv(name)
		if !ok {
			fail("passEnv: %s is not set in the agent's environment", name)
			continue
		}
		vars = append(vars, name+"="+value)
		if value != "" {
			secrets = append(secrets, value)
		}
	}
	return vars, secrets, problems
}
