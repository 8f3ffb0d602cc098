// Package githubactions is the action plugin "github_actions": each Apply
// and Destroy dispatches a GitHub Actions workflow and waits for the run it
// started.
//
// The run is identified exactly. The dispatch asks GitHub for the run's id
// (return_run_details); a server that does not know that parameter (older
// GitHub Enterprise answers 422) is asked again without it, and the run is
// then found by its name, which the workflow sets from the correlation_id
// input (run-name). Either way concurrent dispatches of one workflow never
// follow each other's runs.
//
// While the run goes on, the plugin polls it, with a growing interval, and
// reports the current job and step as the resource's WorkflowRun condition.
// Rate limits are waited out (Retry-After, X-RateLimit-Reset), server errors
// retried; a 401 or 404 fails at once, naming the setting to fix. When the
// operation is cancelled or times out, the run is cancelled through the API.
//
// The outputs are the run's URL and conclusion, its jobs and artifacts, and
// the keys of the JSON object in the artifact named no8s-outputs, when the
// run uploads one.
//
// A run outlives the agent that dispatched it. Its id is recorded as the
// attempt's handle (action.RecordHandle) as soon as the run is known, before
// it is followed; a run whose id cannot be recorded is cancelled. The next
// attempt, on whichever agent, looks the handle up: a run of the same
// operation and generation is followed instead of dispatching again (if it
// completed already, its conclusion is the result); any other run still
// going is cancelled, and the new dispatch waits until GitHub reports it
// completed; a cancelled run of the same operation and generation has no
// result and is dispatched anew. A handle GitHub does not know (404) is
// ignored. A run the plugin stopped following and cancelled may go on until
// GitHub completes the cancel, so such errors wrap action.ErrStillRunning,
// which keeps the handle for the next attempt. So a resource never has two
// runs at once, even after a kill -9.
//
// Nothing lives only in memory: Destroy dispatches the workflow with
// operation=destroy from the request alone, after a restart too. The plugin
// is no Planner: a workflow run cannot observe drift, so it is never
// dispatched again just because time passed.
package githubactions

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/githubapi"
)

// Plugin is the plugin's name in the agent configuration.
const Plugin = "github_actions"

// Defaults of the settings.
const (
	DefaultRef          = "main"
	DefaultAPIURL       = githubapi.DefaultAPIURL
	DefaultPollInterval = 10 * time.Second
	DefaultTimeout      = time.Hour
	// DefaultFindTimeout bounds the search for a run by its name, when the
	// server cannot return it from the dispatch: GitHub lists a dispatched
	// run after a few seconds.
	DefaultFindTimeout = 2 * time.Minute
)

// OutputsArtifact is the artifact whose JSON file becomes outputs.
const OutputsArtifact = "no8s-outputs"

// ConditionType is the resource condition the plugin reports.
const ConditionType = "WorkflowRun"

// The inputs the workflow gets, by their default names.
const (
	InputOperation     = action.PipelineOperation
	InputKind          = action.PipelineKind
	InputName          = action.PipelineName
	InputGeneration    = action.PipelineGeneration
	InputSpec          = action.PipelineSpec
	InputCorrelationID = action.PipelineCorrelationID
	// InputPluginConfig is the resource's plugin configuration as JSON. It
	// is sent only when the resource has one, so workflows that do not
	// declare it keep working.
	InputPluginConfig = action.PipelinePluginConfig
	// InputNamespace is the resource's namespace, sent only for a
	// resource outside the namespace "default" (and not cluster-scoped):
	// workflows written before namespaces keep working for the resources
	// they served, and one that does not declare it refuses the dispatch
	// of another namespace's resource rather than taking it for the
	// default namespace's of the same kind and name.
	InputNamespace = action.PipelineNamespace
)

// standardInputs lists the inputs in the order they are documented.
var standardInputs = []string{InputOperation, InputKind, InputName, InputGeneration, InputSpec, InputCorrelationID, InputPluginConfig, InputNamespace}

// settings are the plugin's settings in the agent configuration.
type settings struct {
	Owner    string `json:"owner"`
	Repo     string `json:"repo"`
	Workflow string `json:"workflow"`
	Ref      string `json:"ref"`
	// APIURL is the REST API's base URL; for GitHub Enterprise Server,
	// https://HOST/api/v3/.
	APIURL   string `json:"apiURL"`
	TokenEnv string `json:"tokenEnv"`
	// PollInterval is the first wait between polls of a run; it grows to
	// eight times as much while the run shows no change.
	PollInterval string `json:"pollInterval"`
	Timeout      string `json:"timeout"`
	FindTimeout  string `json:"findTimeout"`
	// Inputs renames the inputs for workflows that call them otherwise:
	// standard name -> the workflow's input name; "" leaves one out
	// (correlation_id cannot be left out).
	Inputs map[string]string `json:"inputs"`
}

// runner dispatches and follows runs. It is safe for concurrent use.
type runner struct {
	instance     string
	client       *github.Client
	download     *http.Client
	owner, repo  string
	workflow     string
	ref          string
	pollInterval time.Duration
	maxInterval  time.Duration
	timeout      time.Duration
	findTimeout  time.Duration
	inputs       map[string]string
	retry        githubapi.Retrier
	log          *slog.Logger
	// noRunDetails is set once the server refused return_run_details, so
	// that later dispatches do not ask again.
	noRunDetails atomic.Bool
	now          func() time.Time
	// token is the value tokenEnv names, as read, kept only for Secrets:
	// the client holds its own copy.
	token string
}

var (
	_ action.Action       = (*runner)(nil)
	_ action.Timeouter    = (*runner)(nil)
	_ action.SecretHolder = (*runner)(nil)
)

var (
	ownerRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	repoRE  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
	inputRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,99}$`)
)

// New builds a github_actions instance from its settings. It checks every
// setting and reads the token now, so that a mistake stops the agent at
// start; every error names its setting, never the token.
func New(s action.Settings) (action.Action, error) {
	var cfg settings
	if err := s.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	r := &runner{instance: s.Instance, owner: cfg.Owner, repo: cfg.Repo, workflow: cfg.Workflow,
		ref: DefaultRef, pollInterval: DefaultPollInterval, timeout: DefaultTimeout, findTimeout: DefaultFindTimeout,
		now: time.Now}
	var problems []error
	fail := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }

	switch {
	case cfg.Owner == "":
		fail("owner: required")
	case !ownerRE.MatchString(cfg.Owner):
		fail("owner: %q is not a GitHub user or organization name", cfg.Owner)
	}
	switch {
	case cfg.Repo == "":
		fail("repo: required")
	case !repoRE.MatchString(cfg.Repo) || cfg.Repo == "." || cfg.Repo == "..":
		fail("repo: %q is not a repository name", cfg.Repo)
	}
	switch {
	case cfg.Workflow == "":
		fail("workflow: required: the workflow's file name (e.g. no8s-apply.yml) or numeric id")
	case strings.ContainsAny(cfg.Workflow, "/?#") || strings.TrimSpace(cfg.Workflow) != cfg.Workflow:
		fail("workflow: %q is not a file name or id: give the file name alone, e.g. no8s-apply.yml", cfg.Workflow)
	}
	if cfg.Ref != "" {
		r.ref = cfg.Ref
	}

	apiURL := DefaultAPIURL
	if cfg.APIURL != "" {
		apiURL = cfg.APIURL
	}
	if _, err := githubapi.NewClient(apiURL, ""); err != nil {
		fail("apiURL: %v; credentials belong in tokenEnv", err)
	}

	var token string
	switch v, ok := s.LookupEnv(cfg.TokenEnv); {
	case cfg.TokenEnv == "":
		fail("tokenEnv: required: the variable holding a token that may run workflows (actions: write)")
	case !ok:
		fail("tokenEnv: %s is not set in the agent's environment", cfg.TokenEnv)
	case strings.TrimSpace(v) == "":
		fail("tokenEnv: %s is empty", cfg.TokenEnv)
	default:
		token = strings.TrimSpace(v)
		r.token = v
	}

	for _, d := range []struct {
		name string
		raw  string
		into *time.Duration
	}{{"pollInterval", cfg.PollInterval, &r.pollInterval}, {"timeout", cfg.Timeout, &r.timeout}, {"findTimeout", cfg.FindTimeout, &r.findTimeout}} {
		if d.raw == "" {
			continue
		}
		v, err := time.ParseDuration(d.raw)
		switch {
		case err != nil:
			fail("%s: %q is not a duration such as \"10s\" or \"1h\"", d.name, d.raw)
		case v <= 0:
			fail("%s: must be positive, not %q", d.name, d.raw)
		default:
			*d.into = v
		}
	}
	r.maxInterval = max(r.pollInterval, min(8*r.pollInterval, time.Minute))

	r.inputs = make(map[string]string, len(standardInputs))
	for _, in := range standardInputs {
		r.inputs[in] = in
	}
	seen := map[string]string{}
	for _, std := range sortedKeys(cfg.Inputs) {
		to := cfg.Inputs[std]
		switch {
		case !slices.Contains(standardInputs, std):
			fail("inputs: %q is not one of the inputs (%s)", std, strings.Join(standardInputs, ", "))
		case to == "" && std == InputCorrelationID:
			fail("inputs: correlation_id cannot be left out: it is how the run is found")
		case to == "" && std == InputNamespace:
			fail("inputs: namespace cannot be left out: without it, resources of one kind and name in two namespaces are one to the workflow")
		case to != "" && !inputRE.MatchString(to):
			fail("inputs: %s: %q is not a workflow input name", std, to)
		default:
			r.inputs[std] = to
		}
	}
	for _, std := range standardInputs {
		to := r.inputs[std]
		if to == "" {
			continue
		}
		if other, dup := seen[to]; dup {
			fail("inputs: %s and %s both map to %q", other, std, to)
		}
		seen[to] = std
	}

	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	r.client, _ = githubapi.NewClient(apiURL, token)
	// A GitHub that answers 5xx for a while is waited out until the
	// operation's timeout: giving up earlier would leave a run to itself.
	r.retry = githubapi.Retrier{Backoff: r.pollInterval, MaxBackoff: r.maxInterval, ServerErrors: -1}
	r.log = s.Logger
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	// Artifact archives are served from signed URLs on another host: they
	// get no Authorization header.
	r.download = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 5 * time.Minute}
	return r, nil
}

// Timeout implements action.Timeouter: one operation may take the
// configured timeout, plus a minute to find the run and cancel it.
func (r *runner) Timeout() time.Duration { return r.timeout + time.Minute }

// TakesPluginConfig implements action.PluginConfigTaker.
func (r *runner) TakesPluginConfig() string {
	return "as the workflow input " + InputPluginConfig + " (JSON), sent only when the resource has one"
}

// Secrets returns the token: a workflow's logs, outputs or errors may show
// it.
func (r *runner) Secrets() []string {
	if r.token == "" {
		return nil
	}
	return []string{r.token}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
