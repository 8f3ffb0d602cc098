package gitlabtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// CommitStatus is a commit status as the server stores it.
type CommitStatus struct {
	ID          int64
	SHA, Ref    string
	Name        string
	Status      string
	TargetURL   string
	Description string
	PipelineID  int64
	// Author is the user name of the token that posted it.
	Author string
	// Updates counts the posts that moved this record (1 for a new one).
	Updates int
}

type commitStatus struct {
	CommitStatus
	created, started, finished time.Time
	coverage                   *float64
	author                     user
}

// Statuses returns the commit statuses of a project's commit, oldest first;
// a record moved from pending to running to success is one entry. It
// panics if there is no such project.
func (s *Server) Statuses(projectPath, sha string) []CommitStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []CommitStatus
	for _, st := range s.mustProject(projectPath).statuses {
		if st.SHA == sha {
			out = append(out, st.CommitStatus)
		}
	}
	return out
}

// transitions are GitLab's commit-status events: the event a posted state
// fires and the states it may fire from.
var transitions = map[string]struct {
	event string
	from  []string
}{
	"pending":  {"enqueue", []string{"created"}},
	"running":  {"run", []string{"created", "pending"}},
	"success":  {"succeed", []string{"created", "pending", "running"}},
	"failed":   {"drop", []string{"created", "pending", "running"}},
	"canceled": {"cancel", []string{"created", "pending", "running"}},
	"skipped":  {"skip", []string{"created", "pending"}},
}

// setStatus answers POST /projects/:id/statuses/:sha as GitLab does: the
// latest pending or running status of that name and ref moves to the new
// state if its state machine allows it (400 "Cannot transition status via
// :run from :running" when it does not); otherwise a new status is created.
func (s *Server) setStatus(req *http.Request, p *project, c caller, sha string, body []byte) reply {
	params, ok := decodeBody(req, body)
	if !ok {
		return paramError("The provided content-type '" + req.Header.Get("Content-Type") + "' is not supported.")
	}
	state, ok := str(params, "state")
	if !ok {
		return paramError("state is missing")
	}
	tr, ok := transitions[state]
	if !ok {
		return paramError("state does not have a valid value")
	}
	name, _ := str(params, "name")
	if name == "" {
		name, _ = str(params, "context")
	}
	name = cmp.Or(name, "default")
	ref, _ := str(params, "ref")
	target, _ := str(params, "target_url")
	desc, _ := str(params, "description")
	var coverage *float64
	if raw, ok := params["coverage"]; ok && string(raw) != "null" {
		var f float64
		if v, _ := str(params, "coverage"); json.Unmarshal([]byte(v), &f) != nil {
			return paramError("coverage is invalid")
		}
		coverage = &f
	}
	var pipelineID int64
	if v, ok := str(params, "pipeline_id"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return paramError("pipeline_id is invalid")
		}
		pipelineID = n
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	ref = cmp.Or(ref, p.opts.DefaultBranch)
	var cur *commitStatus
	for i := len(p.statuses) - 1; i >= 0; i-- {
		st := p.statuses[i]
		if st.SHA == sha && st.Name == name && st.Ref == ref && (st.Status == "pending" || st.Status == "running") {
			cur = st
			break
		}
	}
	now := s.now()
	if cur == nil {
		cur = &commitStatus{CommitStatus: CommitStatus{ID: s.newID("status"), SHA: sha, Ref: ref, Name: name, Status: "created",
			PipelineID: cmp.Or(pipelineID, s.newID("pipeline"))}, created: now, author: c.user}
		cur.Author = c.user.Username
		p.statuses = append(p.statuses, cur)
	} else if !slices.Contains(tr.from, cur.Status) {
		return message(http.StatusBadRequest, fmt.Sprintf("Cannot transition status via :%s from :%s", tr.event, cur.Status))
	}
	cur.Status = state
	cur.Updates++
	if target != "" {
		cur.TargetURL = target
	}
	if desc != "" {
		cur.Description = desc
	}
	if coverage != nil {
		cur.coverage = coverage
	}
	if state == "running" && cur.started.IsZero() {
		cur.started = now
	}
	if state != "pending" && state != "running" {
		cur.finished = now
	}
	return jsonReply(http.StatusCreated, statusJSON(cur))
}

func statusJSON(st *commitStatus) map[string]any {
	return map[string]any{
		"id": st.ID, "sha": st.SHA, "ref": st.Ref, "status": st.Status, "name": st.Name,
		"target_url": nullable(st.TargetURL), "description": nullable(st.Description),
		"created_at": ts(st.created), "started_at": ts(st.started), "finished_at": ts(st.finished),
		"allow_failure": false, "coverage": st.coverage, "pipeline_id": st.PipelineID, "author": st.author,
	}
}

// listStatuses answers GET /projects/:id/repository/commits/:sha/statuses:
// the latest status per name and ref unless all=true, filtered by ref and
// name, oldest first, paginated.
func (s *Server) listStatuses(req *http.Request, p *project, sha string) reply {
	q := req.URL.Query()
	all := q.Get("all") == "true"
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for i, st := range p.statuses {
		if st.SHA != sha || q.Get("ref") != "" && st.Ref != q.Get("ref") || q.Get("name") != "" && st.Name != q.Get("name") {
			continue
		}
		if !all && slices.ContainsFunc(p.statuses[i+1:], func(o *commitStatus) bool {
			return o.SHA == st.SHA && o.Name == st.Name && o.Ref == st.Ref
		}) {
			continue
		}
		out = append(out, statusJSON(st))
	}
	return listReply(s.paginate(req, len(out)), out)
}
