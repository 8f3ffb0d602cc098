package config

import (
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/no8s/no8s-agent/manifest"
)

// validateTokens checks the API's tokens: unique names, none an ID token's
// entry could be mistaken for, known verbs and action instances.
func (c *Config) validateTokens(ps *problems) {
	tokenNames := map[string]bool{ReadTokenName: c.API.ReadTokenEnv != "", WriteTokenName: c.API.WriteTokenEnv != ""}
	instances := slices.Sorted(maps.Keys(c.Actions))
	if !slices.Contains(instances, noopInstance) {
		instances = append(instances, noopInstance)
		slices.Sort(instances)
	}
	for i, t := range c.API.Tokens {
		key := fmt.Sprintf("api.tokens[%d]", i)
		forIDTokens := t.TokenEnv == "" && c.API.OIDC != nil
		switch {
		case t.Name == "":
			ps.add(key+".name", "required: the name the audit trail shows")
		case forIDTokens && (t.Name == ReadTokenName || t.Name == WriteTokenName):
			// Whether or not the shorthand is set: an ID token naming it must
			// never be mistaken for it, in grants or in the audit trail.
			ps.add(key+".name", "%q is reserved for the token of %sTokenEnv: an entry for ID tokens (without tokenEnv) needs another name, "+
				"and the identity provider another claim value", t.Name, t.Name)
		case tokenNames[t.Name]:
			ps.add(key+".name", "%q is taken: names are unique, and read and write are those of readTokenEnv and writeTokenEnv", t.Name)
		case t.TokenEnv != "" && strings.HasPrefix(t.Name, IDTokenPrefix):
			ps.add(key+".name", "%q starts with %q, which the audit trail gives ID tokens: name the token otherwise", t.Name, IDTokenPrefix)
		}
		tokenNames[t.Name] = true
		if t.TokenEnv == "" && c.API.OIDC == nil {
			ps.add(key+".tokenEnv", "required: the variable holding the token (or configure api.oidc and name the token after an ID token's claim)")
		}
		if len(t.Allow) == 0 {
			ps.add(key+".allow", "required: what the token may do")
		}
		for j, g := range t.Allow {
			gkey := fmt.Sprintf("%s.allow[%d]", key, j)
			if len(g.Verbs) == 0 {
				ps.add(gkey+".verbs", "required: one or more of %s", strings.Join(APIVerbs, ", "))
			}
			for _, v := range g.Verbs {
				if !slices.Contains(APIVerbs, v) {
					ps.add(gkey+".verbs", "unknown verb %q (known: %s)", v, strings.Join(APIVerbs, ", "))
				}
			}
			checkGrantNamespaces(ps, gkey, g)
			if len(g.Actions) == 0 {
				continue
			}
			for _, a := range g.Actions {
				if !slices.Contains(instances, a) {
					ps.add(gkey+".actions", "unknown action instance %q (instances: %s)", a, strings.Join(instances, ", "))
				}
			}
			for _, v := range g.Verbs {
				if slices.Contains(APIVerbs, v) && !slices.Contains(APIActionVerbs, v) {
					ps.add(gkey+".actions", "a grant limited to action instances is about writes to resources (%s), not %s: "+
						"give %s in a grant of its own", strings.Join(APIActionVerbs, ", "), v, v)
				}
			}
		}
	}
}

// checkGrantNamespaces checks the namespaces of a grant: labels, each
// once, and not on verbs only sources take, which a grant limited to
// namespaces would never allow.
func checkGrantNamespaces(ps *problems, gkey string, g APIGrant) {
	seen := map[string]bool{}
	for k, ns := range g.Namespaces {
		nkey := fmt.Sprintf("%s.namespaces[%d]", gkey, k)
		switch {
		case ns == "":
			ps.add(nkey, "empty: name a namespace (a grant without namespaces holds all of them)")
		case seen[ns]:
			ps.add(nkey, "%q is listed twice", ns)
		default:
			for _, msg := range manifest.NamespaceProblems(ns) {
				ps.add(nkey, "Invalid value: %q: %s", ns, msg)
			}
		}
		seen[ns] = true
	}
	if len(g.Namespaces) == 0 {
		return
	}
	for _, v := range g.Verbs {
		if slices.Contains(APISourceVerbs, v) {
			ps.add(gkey+".namespaces", "a grant limited to namespaces is about the resources in them, and %s is about sources, "+
				"which hold every namespace's: give %s in a grant of its own, without namespaces", v, v)
		}
	}
}

// noopInstance is the action instance that always exists (action.Noop).
const noopInstance = "noop"

// hostNameRE is what a host name in api.allowedHosts may look like.
var hostNameRE = regexp.MustCompile(`^(?i)[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?$`)

// checkAllowedHost returns what is wrong with an entry of api.allowedHosts,
// or "".
func checkAllowedHost(h string) string {
	host := h
	switch {
	case strings.TrimSpace(h) == "":
		return "empty: give a host name or address, optionally with a port"
	case strings.Contains(h, "*"):
		return fmt.Sprintf("%q: there is no wildcard; list each name clients use", h)
	case strings.Contains(h, "://") || strings.ContainsAny(h, "/?#@"):
		return fmt.Sprintf("%q is not a URL: give a host name or address, optionally with a port (agent.example.com, agent.example.com:8443)", h)
	}
	if hp, port, err := net.SplitHostPort(h); err == nil {
		host = hp
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("%q: invalid port %q", h, port)
		}
	} else if strings.Count(h, ":") == 1 {
		return fmt.Sprintf("%q: invalid port %q", h, h[strings.Index(h, ":")+1:])
	}
	if net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")) != nil {
		return ""
	}
	if !hostNameRE.MatchString(host) || len(host) > 253 {
		return fmt.Sprintf("%q is not a host name or address", h)
	}
	return ""
}
