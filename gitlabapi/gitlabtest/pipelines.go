package gitlabtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Creation is a pipeline the server created: by API, by trigger token, or
// as the child of a bridge.
type Creation struct {
	// PipelineID is the new pipeline's id.
	PipelineID int64
	// ProjectID and ProjectPath name the project.
	ProjectID   int64
	ProjectPath string
	// Ref and SHA are the ref asked for and the commit it points to.
	Ref, SHA string
	// Source is "api" (POST /pipeline), "trigger" (trigger token) or
	// "parent_pipeline" (a child pipeline).
	Source string
	// Variables are the pipeline variables, in the order sent.
	Variables []Variable
	// Inputs are the inputs as decoded from JSON (string, float64, bool,
	// []any), never nil.
	Inputs map[string]any
	// TriggerToken is the trigger token of a "trigger" pipeline.
	TriggerToken string
	// ParentID is the parent pipeline of a child pipeline.
	ParentID int64
	// At is when the server created the pipeline, by its clock.
	At time.Time
}

// Variable is a pipeline variable.
type Variable struct {
	Key, Value string
	// VariableType is "env_var" (the default) or "file".
	VariableType string
}

// Script tells how a pipeline plays out.
type Script struct {
	// Status is the pipeline's status once its script played: success
	// (the default), failed, canceled, skipped, or manual: a job waits
	// for a person to run it, and the pipeline stays manual, unfinished,
	// until Finish or a cancel ends it.
	Status string
	// WaitingForResource is how many reads, first, see the pipeline
	// waiting_for_resource (a resource_group another pipeline holds).
	WaitingForResource int
	// Polls is how many reads of the pipeline (GET .../pipelines/:id) see
	// it running: it is created pending, reads 1..WaitingForResource see
	// it waiting, the next Polls reads see it running, and the read after
	// sees it finished.
	Polls int
	// Never keeps the pipeline running until it is cancelled or Finish
	// ends it; Polls and Status are then ignored.
	Never bool
	// Jobs are the pipeline's jobs, in order; their stages run in the order
	// they first appear.
	Jobs []Job
	// Bridges are trigger jobs; a bridge with a Child starts a child
	// pipeline when this one starts running.
	Bridges []Bridge
}

// Job is a job of a scripted pipeline.
type Job struct {
	// Name is the job's name.
	Name string
	// Stage is the job's stage; "test" by default.
	Stage string
	// Status is the job's status once the pipeline finished; empty means
	// the pipeline's.
	Status string
	// FailureReason is GitLab's failure_reason of a failed job, e.g.
	// "script_failure"; script_failure by default for a failed job.
	FailureReason string
	// AllowFailure marks a job whose failure does not fail the pipeline.
	AllowFailure bool
	// Log is the job's log, served once the job started.
	Log string
	// Artifacts are the job's artifact files, path -> content, served once
	// the job finished with success or failed.
	Artifacts map[string][]byte
}

// Bridge is a trigger job of a scripted pipeline.
type Bridge struct {
	// Name and Stage are the trigger job's; Stage is "test" by default.
	Name, Stage string
	// Child is how the child pipeline plays; nil is a bridge whose
	// downstream pipeline is never created. The bridge's status is the
	// child's (strategy: depend).
	Child *Script
}

// DefaultScript is the script of pipelines when Options.Script is nil:
// success after two reads, one job "apply" in stage "deploy" with a short
// log and no artifacts.
func DefaultScript(Creation) Script {
	return Script{Status: "success", Polls: 2, Jobs: []Job{{Name: "apply", Stage: "deploy", Log: "$ no8s apply\nApplied.\n"}}}
}

// PipelineState is the state of a pipeline.
type PipelineState struct {
	Creation
	// Status is the pipeline's status now.
	Status string
	// Polls is how many times the pipeline was read.
	Polls int
	// Cancelled says the pipeline was cancelled through the API.
	Cancelled bool
	// Children are the ids of its child pipelines.
	Children []int64
	// JobIDs are the ids of its jobs, in script order.
	JobIDs []int64
}

type pipeline struct {
	id, iid   int64
	project   *project
	c         Creation
	script    Script
	status    string
	polls     int
	cancelled bool
	// cancelReads counts the reads of a canceling pipeline.
	cancelReads int
	// name is its workflow:name, or "".
	name       string
	created    time.Time
	started    time.Time
	finished   time.Time
	updated    time.Time
	jobs       []*job
	bridges    []*bridge
	stageOrder []string
}

type job struct {
	id int64
	pl *pipeline
	j  Job
}

type bridge struct {
	id    int64
	pl    *pipeline
	b     Bridge
	child *pipeline
}

// terminal says whether a pipeline or job with status is finished. A
// manual pipeline is not: it waits for a person to run a job.
func terminal(status string) bool {
	switch status {
	case "success", "failed", "canceled", "skipped":
		return true
	}
	return false
}

// Pipelines returns the pipelines created so far, children included, in
// order.
func (s *Server) Pipelines() []Creation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Creation, len(s.creations))
	for i, c := range s.creations {
		out[i] = cloneCreation(c)
	}
	return out
}

func cloneCreation(c Creation) Creation {
	c.Variables = slices.Clone(c.Variables)
	c.Inputs = maps.Clone(c.Inputs)
	return c
}

// Pipeline returns the state of the pipeline id, and whether there is one.
func (s *Server) Pipeline(id int64) (PipelineState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pl, ok := s.pipelines[id]
	if !ok {
		return PipelineState{}, false
	}
	st := PipelineState{Creation: cloneCreation(pl.c), Status: pl.status, Polls: pl.polls, Cancelled: pl.cancelled}
	for _, b := range pl.bridges {
		if b.child != nil {
			st.Children = append(st.Children, b.child.id)
		}
	}
	for _, j := range pl.jobs {
		st.JobIDs = append(st.JobIDs, j.id)
	}
	return st, true
}

// Cancels returns the ids of the pipelines a cancel was asked for, in
// order, finished ones included.
func (s *Server) Cancels() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cancels)
}

// Finish ends the pipeline id now with status, as if its jobs ended (and
// its unfinished children with theirs); it is how a pipeline scripted with
// Never ends without a cancel. It reports false if there is no such
// pipeline or it already finished.
func (s *Server) Finish(id int64, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	pl, ok := s.pipelines[id]
	if !ok || terminal(pl.status) {
		return false
	}
	s.start(pl)
	s.finish(pl, status)
	return true
}

// createPipeline answers POST /projects/:id/pipeline.
func (s *Server) createPipeline(req *http.Request, p *project, c caller, body []byte) reply {
	params, ok := decodeBody(req, body)
	if !ok {
		return paramError("The provided content-type '" + req.Header.Get("Content-Type") + "' is not supported.")
	}
	ref, ok := str(params, "ref")
	if !ok || ref == "" {
		return paramError("ref is missing")
	}
	var vars []Variable
	if raw, ok := params["variables"]; ok && string(raw) != "null" {
		var list []struct {
			Key          *string `json:"key"`
			Value        *string `json:"value"`
			VariableType string  `json:"variable_type"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return paramError("variables is invalid")
		}
		for _, v := range list {
			if v.Key == nil {
				return paramError("variables[key] is missing")
			}
			if v.VariableType != "" && v.VariableType != "env_var" && v.VariableType != "file" {
				return paramError("variables[variable_type] does not have a valid value")
			}
			vars = append(vars, Variable{Key: *v.Key, Value: deref(v.Value), VariableType: cmp.Or(v.VariableType, "env_var")})
		}
	}
	inputs, rep, ok := parseInputs(params)
	if !ok {
		return rep
	}
	return s.create(p, Creation{Ref: ref, Source: "api", Variables: vars, Inputs: inputs})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func parseInputs(params map[string]json.RawMessage) (map[string]any, reply, bool) {
	inputs := map[string]any{}
	if raw, ok := params["inputs"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &inputs); err != nil || inputs == nil {
			return nil, paramError("inputs is invalid"), false
		}
	}
	return inputs, reply{}, true
}

// trigger answers POST /projects/:id/trigger/pipeline.
func (s *Server) trigger(req *http.Request, p *project, body []byte) reply {
	params, ok := decodeBody(req, body)
	if !ok {
		return paramError("The provided content-type '" + req.Header.Get("Content-Type") + "' is not supported.")
	}
	tok, ok := str(params, "token")
	if !ok || tok == "" {
		return paramError("token is missing")
	}
	ref, ok := str(params, "ref")
	if !ok || ref == "" {
		return paramError("ref is missing")
	}
	s.mu.Lock()
	valid := slices.Contains(p.opts.TriggerTokens, tok)
	s.mu.Unlock()
	if !valid {
		return notFound("")
	}
	var vars []Variable
	if raw, ok := params["variables"]; ok && string(raw) != "null" {
		var m map[string]string
		if err := json.Unmarshal(raw, &m); err != nil {
			return paramError("variables is invalid")
		}
		keys := slices.Sorted(maps.Keys(m))
		for _, k := range keys {
			vars = append(vars, Variable{Key: k, Value: m[k], VariableType: "env_var"})
		}
	}
	inputs, rep, ok := parseInputs(params)
	if !ok {
		return rep
	}
	return s.create(p, Creation{Ref: ref, Source: "trigger", Variables: vars, Inputs: inputs, TriggerToken: tok})
}

// create checks a pipeline's creation as GitLab's chain does (variables
// allowed, ref exists, inputs declared), scripts it and stores it.
func (s *Server) create(p *project, c Creation) reply {
	s.mu.Lock()
	refuse, exists, declared := p.opts.RefuseVariables, p.refExists(c.Ref), p.opts.Inputs
	c.ProjectID, c.ProjectPath = p.id, p.path
	s.mu.Unlock()
	if refuse && len(c.Variables) > 0 {
		return baseError("Insufficient permissions to set pipeline variables")
	}
	if !exists {
		return baseError("Reference not found")
	}
	if declared != nil {
		var unknown []string
		for k := range c.Inputs {
			if !slices.Contains(declared, k) {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return baseError("unknown input arguments: " + strings.Join(unknown, ", "))
		}
	}
	c.SHA = SHA(p.path, c.Ref)
	c.At = s.now()
	s.mu.Lock()
	name := workflowName(p.opts.WorkflowName, c)
	s.mu.Unlock()
	// The script runs outside the lock, so that it may call the server.
	script := s.opts.Script(cloneCreation(c))
	s.mu.Lock()
	defer s.mu.Unlock()
	pl := s.store(p, c, script)
	pl.name = name
	return jsonReply(http.StatusCreated, s.pipelineJSON(pl))
}

// store creates a pipeline and its jobs. Call with s.mu held.
func (s *Server) store(p *project, c Creation, script Script) *pipeline {
	script.Status = cmp.Or(script.Status, "success")
	c.PipelineID = s.newID("pipeline")
	pl := &pipeline{id: c.PipelineID, project: p, c: c, script: script, status: "pending",
		created: c.At, updated: c.At}
	pl.iid = int64(len(s.pipelinesOf(p)) + 1)
	for _, j := range script.Jobs {
		j.Stage = cmp.Or(j.Stage, "test")
		pl.jobs = append(pl.jobs, &job{id: s.newID("job"), pl: pl, j: j})
		pl.addStage(j.Stage)
	}
	for _, b := range script.Bridges {
		b.Stage = cmp.Or(b.Stage, "test")
		pl.bridges = append(pl.bridges, &bridge{id: s.newID("job"), pl: pl, b: b})
		pl.addStage(b.Stage)
	}
	for _, j := range pl.jobs {
		s.jobs[j.id] = j
	}
	s.pipelines[pl.id] = pl
	s.creations = append(s.creations, c)
	return pl
}

func (pl *pipeline) addStage(st string) {
	if !slices.Contains(pl.stageOrder, st) {
		pl.stageOrder = append(pl.stageOrder, st)
	}
}

func (s *Server) pipelinesOf(p *project) []*pipeline {
	var out []*pipeline
	for _, pl := range s.pipelines {
		if pl.project == p {
			out = append(out, pl)
		}
	}
	return out
}

// start moves a pending (or waiting) pipeline to running and creates its
// children. Call with s.mu held.
func (s *Server) start(pl *pipeline) {
	if pl.status != "pending" && pl.status != "waiting_for_resource" {
		return
	}
	now := s.now()
	pl.status, pl.started, pl.updated = "running", now, now
	for _, b := range pl.bridges {
		if b.b.Child == nil || b.child != nil {
			continue
		}
		c := Creation{ProjectID: pl.c.ProjectID, ProjectPath: pl.c.ProjectPath, Ref: pl.c.Ref, SHA: pl.c.SHA,
			Source: "parent_pipeline", Inputs: map[string]any{}, ParentID: pl.id, At: now}
		b.child = s.store(pl.project, c, *b.b.Child)
	}
}

// finish ends a pipeline with status, and its unfinished children with
// theirs. Call with s.mu held.
func (s *Server) finish(pl *pipeline, status string) {
	now := s.now()
	for _, b := range pl.bridges {
		if b.child != nil && !terminal(b.child.status) {
			s.start(b.child)
			s.finish(b.child, b.child.script.Status)
		}
	}
	pl.status, pl.updated = status, now
	if terminal(status) {
		pl.finished = now
	}
}

// advance moves a pipeline on by one read.
func (s *Server) advance(pl *pipeline) {
	pl.polls++
	switch {
	case terminal(pl.status), pl.status == "manual":
		return
	case pl.status == "canceling":
		pl.cancelReads++
		if pl.cancelReads >= s.opts.CancelPolls {
			now := s.now()
			pl.status, pl.finished, pl.updated = "canceled", now, now
		}
		return
	case pl.polls <= pl.script.WaitingForResource:
		pl.status, pl.updated = "waiting_for_resource", s.now()
		return
	}
	s.start(pl)
	if !pl.script.Never && pl.polls > pl.script.WaitingForResource+pl.script.Polls {
		s.finish(pl, pl.script.Status)
	}
}

func (s *Server) pipelineOf(p *project, id int64) (*pipeline, bool) {
	pl, ok := s.pipelines[id]
	return pl, ok && pl.project == p
}

func (s *Server) getPipeline(p *project, id int64) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	pl, ok := s.pipelineOf(p, id)
	if !ok {
		return notFound("")
	}
	s.advance(pl)
	return jsonReply(http.StatusOK, s.pipelineJSON(pl))
}

// cancel answers POST .../pipelines/:id/cancel: 200 whatever the state,
// as GitLab does; an unfinished pipeline and its children are canceled,
// or, when one was running and Options.CancelPolls is set, canceling for
// that many reads.
func (s *Server) cancel(p *project, id int64) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	pl, ok := s.pipelineOf(p, id)
	if !ok {
		return notFound("")
	}
	s.cancels = append(s.cancels, id)
	s.cancelTree(pl)
	return jsonReply(http.StatusOK, s.pipelineJSON(pl))
}

func (s *Server) cancelTree(pl *pipeline) {
	if terminal(pl.status) || pl.status == "canceling" {
		return
	}
	for _, b := range pl.bridges {
		if b.child != nil {
			s.cancelTree(b.child)
		}
	}
	now := s.now()
	pl.cancelled, pl.updated = true, now
	if pl.status == "running" && s.opts.CancelPolls > 0 {
		pl.status = "canceling"
		return
	}
	pl.status, pl.finished = "canceled", now
}

var statusText = map[string][2]string{ // status -> label, text
	"created": {"created", "Created"}, "pending": {"pending", "Pending"}, "running": {"running", "Running"},
	"success": {"passed", "Passed"}, "failed": {"failed", "Failed"}, "canceled": {"canceled", "Canceled"},
	"skipped": {"skipped", "Skipped"}, "manual": {"manual action", "Manual"},
	"canceling": {"canceling", "Canceling"}, "waiting_for_resource": {"waiting for resource", "Waiting"},
}

func detailedStatus(status, path string) map[string]any {
	t := statusText[status]
	return map[string]any{"icon": "status_" + status, "text": t[1], "label": t[0], "group": status, "tooltip": t[0],
		"has_details": true, "details_path": path, "illustration": nil,
		"favicon": "/assets/ci_favicons/favicon_status_" + status + ".png"}
}

func seconds(from, to time.Time) *int64 {
	if from.IsZero() || to.IsZero() {
		return nil
	}
	d := int64(to.Sub(from) / time.Second)
	return &d
}

func (s *Server) pipelineJSON(pl *pipeline) map[string]any {
	web := fmt.Sprintf("%s/-/pipelines/%d", s.webURL(pl.project), pl.id)
	queued := seconds(pl.created, pl.started)
	if queued == nil && pl.status == "pending" {
		queued = seconds(pl.created, s.now())
	}
	return map[string]any{
		"id": pl.id, "iid": pl.iid, "project_id": pl.project.id, "sha": pl.c.SHA, "ref": pl.c.Ref,
		"status": pl.status, "source": pl.c.Source, "before_sha": strings.Repeat("0", 40), "tag": false,
		"yaml_errors": nil, "user": bot, "name": nullable(pl.name),
		"created_at": ts(pl.created), "updated_at": ts(pl.updated), "started_at": ts(pl.started),
		"finished_at": ts(pl.finished), "committed_at": nil,
		// Whole seconds or null: client-go decodes these into int64.
		"duration": seconds(pl.started, pl.finished), "queued_duration": queued,
		"coverage": nil, "web_url": web, "archived": false,
		"detailed_status": detailedStatus(pl.status, strings.TrimPrefix(web, s.URL)),
	}
}

// stageIndex is the position of a stage in the pipeline.
func (pl *pipeline) stageIndex(st string) int { return slices.Index(pl.stageOrder, st) }

// jobStatus is a job's (or a bridge's without child) status by the
// pipeline's: while pending the first stage is pending and the rest
// created; while running the first stage runs; once finished each job has
// its own status or the pipeline's; cancelled, all are canceled.
func (pl *pipeline) jobStatus(stage, own string) string {
	first := pl.stageIndex(stage) == 0
	switch {
	case pl.status == "canceling" && first:
		return "canceling"
	case pl.cancelled:
		return "canceled"
	case pl.status == "pending" && first:
		return "pending"
	case pl.status == "waiting_for_resource" && first:
		return "waiting_for_resource"
	case pl.status == "waiting_for_resource":
		return "created"
	case pl.status == "pending":
		return "created"
	case pl.status == "running" && first:
		return "running"
	case pl.status == "running":
		return "created"
	}
	return cmp.Or(own, pl.status)
}

func (j *job) status() string { return j.pl.jobStatus(j.j.Stage, j.j.Status) }

// started says whether the job has run (and so has a log).
func (j *job) started() bool {
	switch j.status() {
	case "created", "pending", "waiting_for_resource", "skipped", "manual":
		return false
	case "canceled", "canceling":
		return j.pl.stageIndex(j.j.Stage) == 0 && !j.pl.started.IsZero()
	}
	return true
}

// artifactsReady says whether the job's artifacts can be downloaded.
func (j *job) artifactsReady() bool {
	st := j.status()
	return len(j.j.Artifacts) > 0 && (st == "success" || st == "failed")
}

func (s *Server) jobJSON(j *job) map[string]any {
	pl := j.pl
	st := j.status()
	var started, finished time.Time
	if j.started() {
		started = pl.started
		if terminal(st) {
			finished = pl.finished
		}
	}
	var dur any
	if !started.IsZero() {
		end := finished
		if end.IsZero() {
			end = s.now()
		}
		dur = end.Sub(started).Seconds()
	}
	var failure any
	if st == "failed" {
		failure = cmp.Or(j.j.FailureReason, "script_failure")
	}
	artifacts := []map[string]any{}
	var file any
	if j.started() && j.j.Log != "" {
		artifacts = append(artifacts, map[string]any{"file_type": "trace", "filename": "job.log", "size": len(j.j.Log), "file_format": nil})
	}
	if j.artifactsReady() {
		size := 0
		for _, b := range j.j.Artifacts {
			size += len(b)
		}
		artifacts = append(artifacts,
			map[string]any{"file_type": "archive", "filename": "artifacts.zip", "size": size, "file_format": "zip"},
			map[string]any{"file_type": "metadata", "filename": "metadata.gz", "size": 180, "file_format": "gzip"})
		file = map[string]any{"filename": "artifacts.zip", "size": size}
	}
	return map[string]any{
		"id": j.id, "status": st, "stage": j.j.Stage, "name": j.j.Name, "ref": pl.c.Ref, "tag": false,
		"coverage": nil, "allow_failure": j.j.AllowFailure, "created_at": ts(pl.created),
		"started_at": ts(started), "finished_at": ts(finished), "erased_at": nil, "duration": dur,
		"queued_duration": 0.5, "user": bot, "commit": map[string]any{"id": pl.c.SHA, "short_id": pl.c.SHA[:8]},
		"pipeline": map[string]any{"id": pl.id, "project_id": pl.project.id, "ref": pl.c.Ref, "sha": pl.c.SHA, "status": pl.status},
		"web_url":  fmt.Sprintf("%s/-/jobs/%d", s.webURL(pl.project), j.id), "project": map[string]any{"ci_job_token_scope_enabled": false},
		"artifacts": artifacts, "artifacts_file": file, "artifacts_expire_at": nil, "tag_list": []string{},
		"runner": nil, "failure_reason": failure,
	}
}

func (s *Server) pipelineInfo(pl *pipeline) map[string]any {
	return map[string]any{"id": pl.id, "iid": pl.iid, "project_id": pl.project.id, "sha": pl.c.SHA, "ref": pl.c.Ref,
		"status": pl.status, "source": pl.c.Source, "name": nullable(pl.name), "created_at": ts(pl.created), "updated_at": ts(pl.updated),
		"web_url": fmt.Sprintf("%s/-/pipelines/%d", s.webURL(pl.project), pl.id)}
}

func (s *Server) bridgeJSON(b *bridge) map[string]any {
	pl := b.pl
	st := pl.jobStatus(b.b.Stage, "")
	var downstream any
	if b.child != nil {
		st = b.child.status
		downstream = s.pipelineInfo(b.child)
	}
	return map[string]any{
		"id": b.id, "status": st, "stage": b.b.Stage, "name": b.b.Name, "ref": pl.c.Ref, "tag": false,
		"coverage": nil, "allow_failure": false, "created_at": ts(pl.created), "started_at": ts(pl.started),
		"finished_at": nil, "erased_at": nil, "duration": nil, "queued_duration": nil, "user": bot,
		"commit":   map[string]any{"id": pl.c.SHA, "short_id": pl.c.SHA[:8]},
		"pipeline": s.pipelineInfo(pl), "web_url": fmt.Sprintf("%s/-/jobs/%d", s.webURL(pl.project), b.id),
		"downstream_pipeline": downstream,
	}
}

// scopeFilter reads scope / scope[] (job statuses).
func scopeFilter(req *http.Request) func(string) bool {
	q := req.URL.Query()
	scopes := append(q["scope[]"], q["scope"]...)
	return func(st string) bool { return len(scopes) == 0 || slices.Contains(scopes, st) }
}

// listJobs answers GET .../pipelines/:id/jobs: the pipeline's jobs (not
// its bridges), newest first, as GitLab orders them.
func (s *Server) listJobs(req *http.Request, p *project, id int64) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	pl, ok := s.pipelineOf(p, id)
	if !ok {
		return notFound("")
	}
	keep := scopeFilter(req)
	var out []map[string]any
	for i := len(pl.jobs) - 1; i >= 0; i-- {
		if j := pl.jobs[i]; keep(j.status()) {
			out = append(out, s.jobJSON(j))
		}
	}
	return listReply(s.paginate(req, len(out)), out)
}

// listBridges answers GET .../pipelines/:id/bridges, newest first.
func (s *Server) listBridges(req *http.Request, p *project, id int64) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	pl, ok := s.pipelineOf(p, id)
	if !ok {
		return notFound("")
	}
	keep := scopeFilter(req)
	var out []map[string]any
	for i := len(pl.bridges) - 1; i >= 0; i-- {
		b := s.bridgeJSON(pl.bridges[i])
		if keep(b["status"].(string)) {
			out = append(out, b)
		}
	}
	return listReply(s.paginate(req, len(out)), out)
}

func (s *Server) jobOf(p *project, id int64) (*job, bool) {
	j, ok := s.jobs[id]
	return j, ok && j.pl.project == p
}

// trace answers GET .../jobs/:id/trace: the whole log as plain text, empty
// before the job started.
func (s *Server) trace(p *project, id int64) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobOf(p, id)
	if !ok {
		return notFound("")
	}
	log := ""
	if j.started() {
		log = j.j.Log
	}
	return reply{status: http.StatusOK, headers: map[string]string{"Content-Type": "text/plain; charset=utf-8"}, body: []byte(log)}
}

// artifact answers GET .../jobs/:id/artifacts/*path with the file's raw
// content, 404 when the job has no such file (yet).
func (s *Server) artifact(p *project, id int64, path string) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobOf(p, id)
	if !ok {
		return notFound("")
	}
	b, ok := j.j.Artifacts[path]
	if !ok || !j.artifactsReady() {
		return notFound("")
	}
	name := path[strings.LastIndex(path, "/")+1:]
	return reply{status: http.StatusOK, headers: map[string]string{"Content-Type": "application/octet-stream",
		"Content-Disposition": fmt.Sprintf("attachment; filename=%q; filename*=UTF-8''%s", name, name)}, body: b}
}

// inputRef and variableRef are how workflow:name refers to an input and to
// a variable.
var (
	inputRef    = regexp.MustCompile(`\$\[\[\s*inputs\.([A-Za-z0-9_-]+)\s*\]\]`)
	variableRef = regexp.MustCompile(`\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))`)
)

// workflowName evaluates a workflow:name for a new pipeline: inputs are
// interpolated when the configuration is read, variables expanded after;
// an unknown variable expands to nothing, as in GitLab.
func workflowName(tmpl string, c Creation) string {
	if tmpl == "" {
		return ""
	}
	name := inputRef.ReplaceAllStringFunc(tmpl, func(m string) string {
		v, ok := c.Inputs[inputRef.FindStringSubmatch(m)[1]]
		if !ok {
			return ""
		}
		if s, ok := v.(string); ok {
			return s
		}
		b, _ := json.Marshal(v)
		return string(b)
	})
	return variableRef.ReplaceAllStringFunc(name, func(m string) string {
		sub := variableRef.FindStringSubmatch(m)
		key := cmp.Or(sub[1], sub[2])
		for _, v := range c.Variables {
			if v.Key == key {
				return v.Value
			}
		}
		return ""
	})
}

// listPipelines answers GET /projects/:id/pipelines: the project's
// pipelines, children included, filtered by scope, status, source, ref,
// sha, name (exact), updated_after/before and created_after/before, ordered
// by id (or updated_at), newest first unless sort=asc.
func (s *Server) listPipelines(req *http.Request, p *project) reply {
	q := req.URL.Query()
	var bounds [4]time.Time // updated after, before; created after, before
	for i, k := range []string{"updated_after", "updated_before", "created_after", "created_before"} {
		if v := q.Get(k); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return paramError(k + " is invalid")
			}
			bounds[i] = t
		}
	}
	orderBy := cmp.Or(q.Get("order_by"), "id")
	if !slices.Contains([]string{"id", "status", "ref", "updated_at", "user_id"}, orderBy) {
		return paramError("order_by does not have a valid value")
	}
	sortDir := cmp.Or(q.Get("sort"), "desc")
	if sortDir != "asc" && sortDir != "desc" {
		return paramError("sort does not have a valid value")
	}
	scope := q.Get("scope")
	if scope != "" && !slices.Contains([]string{"running", "pending", "finished", "branches", "tags"}, scope) {
		return paramError("scope does not have a valid value")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var list []*pipeline
	for _, pl := range s.pipelinesOf(p) {
		switch {
		case scope == "running" && pl.status != "running",
			scope == "pending" && pl.status != "pending",
			scope == "finished" && !terminal(pl.status),
			scope == "tags",
			q.Get("status") != "" && pl.status != q.Get("status"),
			q.Get("source") != "" && pl.c.Source != q.Get("source"),
			q.Get("ref") != "" && pl.c.Ref != q.Get("ref"),
			q.Get("sha") != "" && pl.c.SHA != q.Get("sha"),
			q.Get("name") != "" && pl.name != q.Get("name"),
			!bounds[0].IsZero() && !pl.updated.After(bounds[0]),
			!bounds[1].IsZero() && !pl.updated.Before(bounds[1]),
			!bounds[2].IsZero() && !pl.created.After(bounds[2]),
			!bounds[3].IsZero() && !pl.created.Before(bounds[3]):
			continue
		}
		list = append(list, pl)
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if orderBy == "updated_at" && !a.updated.Equal(b.updated) {
			return a.updated.Before(b.updated) == (sortDir == "asc")
		}
		return a.id < b.id == (sortDir == "asc")
	})
	out := make([]map[string]any, 0, len(list))
	for _, pl := range list {
		out = append(out, s.pipelineInfo(pl))
	}
	return listReply(s.paginate(req, len(out)), out)
}
