package gitlabtest

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// ProjectOptions configure a project. Zero fields take the defaults.
type ProjectOptions struct {
	// ID is the project's numeric id; 0 assigns one.
	ID int64
	// DefaultBranch is the default branch; DefaultBranch by default.
	DefaultBranch string
	// Refs are the branches and tags that exist besides the default
	// branch; nil means every ref exists. A pipeline for a ref that does
	// not exist fails with GitLab's "Reference not found".
	Refs []string
	// Tokens are project access tokens valid for this project only, with
	// their role; other projects answer them 404, as GitLab does.
	Tokens map[string]Role
	// TriggerTokens are the project's pipeline trigger tokens.
	TriggerTokens []string
	// RefuseVariables plays a project whose pipeline-variables role is "no
	// one allowed" (the default of new gitlab.com projects): creating a
	// pipeline with variables fails.
	RefuseVariables bool
	// Inputs are the inputs the CI configuration declares (spec:inputs);
	// an input not among them fails the pipeline's creation. nil accepts
	// any input.
	Inputs []string
	// WorkflowName is the CI configuration's workflow:name, which names
	// the pipelines created by API or trigger: $[[ inputs.NAME ]] is
	// replaced with the input's value and $NAME or ${NAME} with the
	// pipeline variable's, as GitLab does. Empty leaves them unnamed.
	WorkflowName string
}

type project struct {
	id   int64
	path string
	opts ProjectOptions
	mrs  []*mergeRequest
	// statuses are the commit statuses, oldest first.
	statuses []*commitStatus
}

type user struct {
	ID       int64  `json:"id"`
	Username string `json:"username"`
	Name     string `json:"name"`
	State    string `json:"state"`
	Locked   bool   `json:"locked"`
	Avatar   string `json:"avatar_url"`
	WebURL   string `json:"web_url"`
}

// bot is the user of Options.Token.
var bot = user{ID: 4242, Username: DefaultUser, Name: "no8s bot", State: "active", WebURL: "https://gitlab.example.com/" + DefaultUser}

// tokenUser is the bot user GitLab creates for a project access token.
func (p *project) tokenUser(tok string) user {
	keys := make([]string, 0, len(p.opts.Tokens))
	for k := range p.opts.Tokens {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	n := slices.Index(keys, tok) + 1
	name := fmt.Sprintf("project_%d_bot_%d", p.id, n)
	return user{ID: p.id*100 + int64(n), Username: name, Name: name, State: "active", WebURL: "https://gitlab.example.com/" + name}
}

// AddProject adds a project at path (group[/subgroup...]/name) and returns
// its id. Adding a path again replaces nothing and returns the existing id.
func (s *Server) AddProject(path string, opts ProjectOptions) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.findProject(path); p != nil {
		return p.id
	}
	if opts.DefaultBranch == "" {
		opts.DefaultBranch = DefaultBranch
	}
	id := opts.ID
	if id == 0 {
		id = s.newID("project")
	}
	s.projects = append(s.projects, &project{id: id, path: path, opts: opts})
	return id
}

// findProject finds a project by numeric id or path, case-insensitively
// like GitLab. Call with s.mu held.
func (s *Server) findProject(idOrPath string) *project {
	n, err := strconv.ParseInt(idOrPath, 10, 64)
	for _, p := range s.projects {
		if err == nil && p.id == n || strings.EqualFold(p.path, idOrPath) {
			return p
		}
	}
	return nil
}

// mustProject finds a project for a test's accessor; it fails loudly on a
// mistake in the test. Call with s.mu held.
func (s *Server) mustProject(idOrPath string) *project {
	p := s.findProject(idOrPath)
	if p == nil {
		panic(fmt.Sprintf("gitlabtest: no project %q", idOrPath))
	}
	return p
}

// refExists says whether ref is a branch or tag of p.
func (p *project) refExists(ref string) bool {
	return p.opts.Refs == nil || ref == p.opts.DefaultBranch || slices.Contains(p.opts.Refs, ref)
}

// SHA is the commit a ref of a project points to in the fake: stable, and
// different per project and ref.
func SHA(projectPath, ref string) string {
	sum := sha1.Sum([]byte(strings.ToLower(projectPath) + "\x00" + ref))
	return hex.EncodeToString(sum[:])
}

func (s *Server) webURL(p *project) string { return s.URL + "/" + p.path }

func (s *Server) projectReply(p *project) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := p.path[strings.LastIndex(p.path, "/")+1:]
	ns := p.path[:max(strings.LastIndex(p.path, "/"), 0)]
	host := strings.TrimPrefix(s.URL, "http://")
	created := ts(s.started.AddDate(0, -6, 0))
	return jsonReply(http.StatusOK, map[string]any{
		"id":                  p.id,
		"description":         nil,
		"name":                name,
		"name_with_namespace": strings.ReplaceAll(p.path, "/", " / "),
		"path":                name,
		"path_with_namespace": p.path,
		"created_at":          created,
		"default_branch":      p.opts.DefaultBranch,
		"tag_list":            []string{},
		"topics":              []string{},
		"ssh_url_to_repo":     "git@" + host + ":" + p.path + ".git",
		"http_url_to_repo":    s.webURL(p) + ".git",
		"web_url":             s.webURL(p),
		"readme_url":          nil,
		"forks_count":         0,
		"star_count":          0,
		"last_activity_at":    created,
		"visibility":          "private",
		"archived":            false,
		"empty_repo":          false,
		"namespace": map[string]any{"id": p.id + 10_000, "name": ns, "path": ns, "kind": "group", "full_path": ns,
			"web_url": s.URL + "/groups/" + ns},
		"merge_requests_enabled":                      true,
		"jobs_enabled":                                true,
		"builds_access_level":                         "enabled",
		"ci_config_path":                              nil,
		"ci_pipeline_variables_minimum_override_role": map[bool]string{true: "no_one_allowed", false: "developer"}[p.opts.RefuseVariables],
	})
}
