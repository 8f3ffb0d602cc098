// Package gitlabpipelines is the action plugin "gitlab_pipelines": each
// Apply and Destroy creates a GitLab CI/CD pipeline and waits for it to
// finish, following its jobs and its child pipelines.
//
// The pipeline is identified exactly: GitLab answers the creation with the
// pipeline's id. The request carries the resource as pipeline inputs
// (spec:inputs, the default: new gitlab.com projects refuse pipeline
// variables) or, with pass: variables, as pipeline variables. Creating a
// pipeline is not idempotent: GitLab may create it and still answer 5xx, or
// the connection may drop after it did. So a server error on creation is
// not retried blindly: the pipeline is looked for first among the recent
// pipelines of the ref, by the correlation id in its name (the CI
// configuration sets workflow:name from the correlation_id input), and
// created again only when none shows.
//
// Two tokens may be configured. tokenEnv, always required, names a project,
// group or personal access token with the api scope and the Developer role:
// it creates the pipeline, reads it, its jobs, logs and artifacts, and
// cancels it. triggerTokenEnv, optional, names a pipeline trigger token:
// the pipeline is then created through the trigger (it runs as the
// trigger's owner, who may be allowed what the agent's token is not, such
// as a protected branch's environments), and tokenEnv only follows and
// cancels it. A trigger token alone cannot read or cancel a pipeline; an
// agent that could only fire pipelines could neither report their outcome
// nor keep a resource from having two at once after a crash, so a trigger
// token never stands alone.
//
// While the pipeline goes on, the plugin polls it, with a growing interval,
// and reports the current stage and job, with their links, as the
// resource's Pipeline condition. A pipeline waiting for a resource group or
// for a person to run a manual job is in progress, not finished. Rate limits
// are waited out (Retry-After, RateLimit-Reset), server errors retried; a
// 400, 401, 403 or 404 fails at once, saying what to fix. When the operation
// is cancelled or times out, the pipeline is cancelled through the API.
//
// The outputs are the pipeline's id, URL and status, its jobs (child
// pipelines' included), and the keys of the JSON object in the artifact file
// no8s-outputs.json of any job that uploads one. A failed pipeline fails the
// operation naming the failed job, its stage and the last lines of its log.
//
// A pipeline outlives the agent that created it. Its project and id are
// recorded as the attempt's handle (action.RecordHandle) as soon as GitLab
// answers, before it is followed; a pipeline whose handle cannot be recorded
// is cancelled. The next attempt, on whichever agent, looks the handle up: a
// pipeline of the same operation and generation is followed instead of
// creating another (if it finished already, its status is the result;
// a canceled or canceling one has none and a new pipeline is created once
// it stopped); any other
// pipeline still going is cancelled, and the new one is created only once
// GitLab reports the old one finished. A handle GitLab does not know (404)
// is ignored. A pipeline the plugin stopped following and cancelled may go
// on until its jobs have stopped, so such errors wrap action.ErrStillRunning,
// which keeps the handle for the next attempt. So a resource never has two
// pipelines at once, even after a kill -9.
//
// Nothing lives only in memory: Destroy creates a pipeline with operation
// destroy from the request alone, after a restart too. The plugin is no
// Planner: a pipeline cannot observe drift, so it is never run again just
// because time passed.
package gitlabpipelines

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/redact"
)

// Plugin is the plugin's name in the agent configuration.
const Plugin = "gitlab_pipelines"

// Defaults of the settings.
const (
	DefaultBaseURL      = gitlabapi.DefaultBaseURL
	DefaultRef          = "main"
	DefaultPollInterval = 10 * time.Second
	DefaultTimeout      = time.Hour
	// DefaultFindTimeout bounds the search for a pipeline by its name after
	// its creation got a server error: a pipeline GitLab created is listed
	// at once, so a minute is plenty.
	DefaultFindTimeout = time.Minute
)

// How the request reaches the pipeline (the pass setting).
const (
	// PassInputs sends pipeline inputs, declared by spec:inputs.
	PassInputs = "inputs"
	// PassVariables sends pipeline variables, which a project may forbid.
	PassVariables = "variables"
)

// OutputsFile is the artifact file whose JSON object becomes outputs.
const OutputsFile = "no8s-outputs.json"

// ConditionType is the resource condition the plugin reports.
const ConditionType = "Pipeline"

// The inputs (or variables) the pipeline gets, by their default names:
// those of the github_actions plugin, so that one resource type can move
// between the two.
const (
	InputOperation     = action.PipelineOperation
	InputKind          = action.PipelineKind
	InputName          = action.PipelineName
	InputGeneration    = action.PipelineGeneration
	InputSpec          = action.PipelineSpec
	InputCorrelationID = action.PipelineCorrelationID
	// InputPluginConfig is the resource's plugin configuration as JSON,
	// sent only when the resource has one: GitLab refuses an input the
	// configuration does not declare.
	InputPluginConfig = action.PipelinePluginConfig
	// InputNamespace is the resource's namespace, sent only for a resource
	// outside the namespace "default" (and not cluster-scoped), as
	// github_actions does.
	InputNamespace = action.PipelineNamespace
)

// standardInputs lists the inputs in the order they are documented.
var standardInputs = []string{InputOperation, InputKind, InputName, InputGeneration, InputSpec, InputCorrelationID, InputPluginConfig, InputNamespace}

// settings are the plugin's settings in the agent configuration.
type settings struct {
	// BaseURL is the GitLab instance: https://gitlab.com or https://HOST
	// (https://HOST/PREFIX under a relative URL root).
	BaseURL string `json:"baseURL"`
	// Project is the project's numeric id or its full path.
	Project         string `json:"project"`
	Ref             string `json:"ref"`
	TokenEnv        string `json:"tokenEnv"`
	TriggerTokenEnv string `json:"triggerTokenEnv"`
	// Pass is inputs or variables.
	Pass string `json:"pass"`
	// PollInterval is the first wait between polls of a pipeline; it grows
	// to eight times as much (at most a minute) while nothing changes.
	PollInterval string `json:"pollInterval"`
	Timeout      string `json:"timeout"`
	FindTimeout  string `json:"findTimeout"`
	// Names renames the inputs (or variables) for pipelines that call them
	// otherwise: standard name -> the pipeline's name; "" leaves one out
	// (correlation_id and namespace cannot be left out).
	Names map[string]string `json:"names"`
}

// runner creates and follows pipelines. It is safe for concurrent use.
type runner struct {
	instance string
	client   *gitlab.Client
	// trigger creates pipelines with the trigger token; nil when there is
	// none.
	trigger *gitlab.Client
	// project is the project as client-go takes it: an int64 id or a path.
	project      any
	projectLabel string
	ref          string
	pass         string
	pollInterval time.Duration
	maxInterval  time.Duration
	timeout      time.Duration
	findTimeout  time.Duration
	names        map[string]string
	retry        gitlabapi.Retrier
	log          *slog.Logger
	now          func() time.Time
	// token and triggerToken are the values the settings name, as read,
	// kept for Secrets; triggerValue is the trigger token as sent.
	token, triggerToken, triggerValue string
	// masker masks the tokens in what the plugin quotes of a pipeline's
	// logs, before any cut.
	masker *redact.Masker
}

var (
	_ action.Action            = (*runner)(nil)
	_ action.Timeouter         = (*runner)(nil)
	_ action.SecretHolder      = (*runner)(nil)
	_ action.PluginConfigTaker = (*runner)(nil)
)

var (
	// projectPathRE is a project's full path: a namespace (groups and
	// subgroups) and the project's path.
	projectPathRE = regexp.MustCompile(`^[A-Za-z0-9_.][A-Za-z0-9_.-]*(/[A-Za-z0-9_.][A-Za-z0-9_.-]*)+$`)
	inputRE       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,99}$`)
	variableRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,254}$`)
)

// New builds a gitlab_pipelines instance from its settings. It checks every
// setting and reads the tokens now, so that a mistake stops the agent at
// start; every error names its setting, never a token.
func New(s action.Settings) (action.Action, error) {
	var cfg settings
	if err := s.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	r := &runner{instance: s.Instance, ref: DefaultRef, pass: PassInputs, pollInterval: DefaultPollInterval,
		timeout: DefaultTimeout, findTimeout: DefaultFindTimeout, now: time.Now}
	var problems []error
	fail := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }

	switch p := strings.TrimSpace(cfg.Project); {
	case p == "":
		fail("project: required: the project's numeric id or full path, e.g. acme/infra/pipelines")
	case p != cfg.Project:
		fail("project: %q has surrounding spaces", cfg.Project)
	case isDigits(p):
		id, err := strconv.ParseInt(p, 10, 64)
		if err != nil || id <= 0 {
			fail("project: %q is not a project id", p)
		}
		r.project, r.projectLabel = id, p
	case strings.Contains(p, "://") || strings.HasSuffix(p, ".git"):
		fail("project: %q is a URL: give the project's path, e.g. acme/infra/pipelines, and the instance in baseURL", p)
	case !projectPathRE.MatchString(p) || slices.ContainsFunc(strings.Split(p, "/"), func(seg string) bool { return strings.Trim(seg, ".") == "" }):
		fail("project: %q is not a project path such as group/project or group/subgroup/project", p)
	default:
		r.project, r.projectLabel = p, p
	}
	if cfg.Ref != "" {
		r.ref = cfg.Ref
	}
	switch cfg.Pass {
	case "", PassInputs:
	case PassVariables:
		r.pass = PassVariables
	default:
		fail("pass: %q is neither inputs nor variables", cfg.Pass)
	}

	base, err := gitlabapi.ParseBaseURL(cfg.BaseURL)
	if err != nil {
		fail("baseURL: %v", err)
	}

	switch v, ok := s.LookupEnv(cfg.TokenEnv); {
	case cfg.TokenEnv == "":
		fail("tokenEnv: required: the variable holding an access token with the api scope and the Developer role, which follows and cancels pipelines")
	case !ok:
		fail("tokenEnv: %s is not set in the agent's environment", cfg.TokenEnv)
	case strings.TrimSpace(v) == "":
		fail("tokenEnv: %s is empty", cfg.TokenEnv)
	default:
		r.token = v
	}
	if cfg.TriggerTokenEnv != "" {
		switch v, ok := s.LookupEnv(cfg.TriggerTokenEnv); {
		case !ok:
			fail("triggerTokenEnv: %s is not set in the agent's environment", cfg.TriggerTokenEnv)
		case strings.TrimSpace(v) == "":
			fail("triggerTokenEnv: %s is empty", cfg.TriggerTokenEnv)
		case cfg.TriggerTokenEnv == cfg.TokenEnv:
			fail("triggerTokenEnv: names the same variable as tokenEnv: a trigger token cannot read or cancel pipelines, and an access token is no trigger token")
		default:
			r.triggerToken, r.triggerValue = v, strings.TrimSpace(v)
		}
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

	what, nameRE := "input", inputRE
	if r.pass == PassVariables {
		what, nameRE = "variable", variableRE
	}
	r.names = make(map[string]string, len(standardInputs))
	for _, in := range standardInputs {
		r.names[in] = in
	}
	for _, std := range slices.Sorted(maps.Keys(cfg.Names)) {
		to := cfg.Names[std]
		switch {
		case !slices.Contains(standardInputs, std):
			fail("names: %q is not one of the inputs (%s)", std, strings.Join(standardInputs, ", "))
		case to == "" && std == InputCorrelationID:
			fail("names: correlation_id cannot be left out: it names the pipeline, which is how it is found after a failed creation")
		case to == "" && std == InputNamespace:
			fail("names: namespace cannot be left out: without it, resources of one kind and name in two namespaces are one to the pipeline")
		case to != "" && !nameRE.MatchString(to):
			fail("names: %s: %q is not a pipeline %s name", std, to, what)
		default:
			r.names[std] = to
		}
	}
	seen := map[string]string{}
	for _, std := range standardInputs {
		to := r.names[std]
		if to == "" {
			continue
		}
		if other, dup := seen[to]; dup {
			fail("names: %s and %s both map to %q", other, std, to)
		}
		seen[to] = std
	}

	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	if r.client, err = gitlabapi.NewClient(base.String(), strings.TrimSpace(r.token)); err != nil {
		return nil, fmt.Errorf("tokenEnv: %w", err)
	}
	if r.triggerValue != "" {
		if r.trigger, err = gitlabapi.NewTriggerClient(base.String()); err != nil {
			return nil, fmt.Errorf("baseURL: %w", err)
		}
	}
	// A GitLab that answers 5xx for a while is waited out until the
	// operation's timeout: giving up earlier would leave a pipeline to
	// itself.
	r.retry = gitlabapi.Retrier{Backoff: r.pollInterval, MaxBackoff: r.maxInterval, ServerErrors: -1}
	r.masker = redact.New(r.Secrets()...)
	r.log = s.Logger
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	// Errors logged quote GitLab's answers, which may echo a token.
	r.log = slog.New(r.masker.Handler(r.log.Handler()))
	return r, nil
}

// Timeout implements action.Timeouter: one operation may take the
// configured timeout, plus a minute to find the pipeline and cancel it.
func (r *runner) Timeout() time.Duration { return r.timeout + time.Minute }

// TakesPluginConfig implements action.PluginConfigTaker.
func (r *runner) TakesPluginConfig() string {
	return "as the pipeline " + r.pass + " " + InputPluginConfig + " (JSON), sent only when the resource has one"
}

// Secrets returns the tokens: a pipeline's logs, outputs or errors may
// show them.
func (r *runner) Secrets() []string {
	var out []string
	for _, v := range []string{r.token, r.triggerToken} {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
