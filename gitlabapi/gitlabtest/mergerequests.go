package gitlabtest

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// MergeRequest is a merge request of a project.
type MergeRequest struct {
	// IID is the merge request's number in the project; 0 assigns the
	// next one.
	IID int64
	// ID is its global id, assigned by the server.
	ID int64
	// Title is its title; "Merge request !IID" by default.
	Title string
	// State is opened (the default), closed, merged or locked.
	State string
	// SourceBranch and TargetBranch are the branches; TargetBranch is the
	// project's default branch by default.
	SourceBranch, TargetBranch string
	// SHA is the source branch's head commit; SHA(path, SourceBranch) by
	// default.
	SHA string
	// Draft marks a draft merge request.
	Draft bool
}

// Note is a note (comment) on a merge request.
type Note struct {
	ID int64
	// Body is the note's text.
	Body string
	// Author is the user name of who wrote it.
	Author string
	// System marks notes GitLab writes itself ("added 1 commit").
	System bool
	// Updates counts the edits through the API.
	Updates int
}

type mergeRequest struct {
	MergeRequest
	project *project
	created time.Time
	updated time.Time
	notes   []*note
	// quickActions are the quick actions run from API notes, in order.
	quickActions []string
}

type note struct {
	Note
	author           user
	created, updated time.Time
}

// AddMergeRequest adds a merge request to the project at path (or numeric
// id) and returns it with its defaults filled in. It panics if there is no
// such project.
func (s *Server) AddMergeRequest(projectPath string, mr MergeRequest) MergeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.mustProject(projectPath)
	if mr.IID == 0 {
		mr.IID = int64(len(p.mrs) + 1)
		for _, o := range p.mrs {
			mr.IID = max(mr.IID, o.IID+1)
		}
	}
	mr.ID = s.newID("mr")
	mr.Title = cmp.Or(mr.Title, fmt.Sprintf("Merge request !%d", mr.IID))
	mr.State = cmp.Or(mr.State, "opened")
	mr.SourceBranch = cmp.Or(mr.SourceBranch, fmt.Sprintf("feature-%d", mr.IID))
	mr.TargetBranch = cmp.Or(mr.TargetBranch, p.opts.DefaultBranch)
	mr.SHA = cmp.Or(mr.SHA, SHA(p.path, mr.SourceBranch))
	now := s.now()
	p.mrs = append(p.mrs, &mergeRequest{MergeRequest: mr, project: p, created: now, updated: now})
	return mr
}

// UpdateMergeRequest changes a merge request the way a push (a new SHA),
// closing or merging it (State) would, and returns it. It panics if there
// is no such merge request.
func (s *Server) UpdateMergeRequest(projectPath string, iid int64, update func(*MergeRequest)) MergeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mustProject(projectPath).mr(iid)
	if mr == nil {
		panic(fmt.Sprintf("gitlabtest: no merge request !%d in %s", iid, projectPath))
	}
	id, iidBefore := mr.ID, mr.IID
	update(&mr.MergeRequest)
	mr.ID, mr.IID = id, iidBefore
	mr.updated = s.now()
	s.notify()
	return mr.MergeRequest
}

// AddNote adds a note to a merge request as user author (a reviewer, or
// GitLab itself with system) and returns its id; tests use it to show notes
// the agent did not write. It panics if there is no such merge request.
func (s *Server) AddNote(projectPath string, iid int64, author, body string, system bool) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mustProject(projectPath).mr(iid)
	if mr == nil {
		panic(fmt.Sprintf("gitlabtest: no merge request !%d in %s", iid, projectPath))
	}
	u := user{ID: int64(1000 + len(author)), Username: author, Name: author, State: "active", WebURL: "https://gitlab.example.com/" + author}
	return s.addNote(mr, u, body, system).ID
}

// DeleteNote deletes a note of a merge request, as a maintainer may. It
// panics if there is no such merge request.
func (s *Server) DeleteNote(projectPath string, iid, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mustProject(projectPath).mr(iid)
	if mr == nil {
		panic(fmt.Sprintf("gitlabtest: no merge request !%d in %s", iid, projectPath))
	}
	mr.notes = slices.DeleteFunc(mr.notes, func(n *note) bool { return n.ID == id })
}

// Notes returns the notes of a merge request, oldest first. It panics if
// there is no such project.
func (s *Server) Notes(projectPath string, iid int64) []Note {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mustProject(projectPath).mr(iid)
	if mr == nil {
		return nil
	}
	out := make([]Note, len(mr.notes))
	for i, n := range mr.notes {
		out[i] = n.Note
	}
	return out
}

func (p *project) mr(iid int64) *mergeRequest {
	for _, mr := range p.mrs {
		if mr.IID == iid {
			return mr
		}
	}
	return nil
}

// addNote stores a note. Call with s.mu held.
func (s *Server) addNote(mr *mergeRequest, u user, body string, system bool) *note {
	now := s.now()
	n := &note{Note: Note{ID: s.newID("note"), Body: body, Author: u.Username, System: system}, author: u, created: now, updated: now}
	mr.notes = append(mr.notes, n)
	return n
}

func (s *Server) mrJSON(mr *mergeRequest) map[string]any {
	p := mr.project
	var merged, closed any
	switch mr.State {
	case "merged":
		merged = ts(mr.updated)
	case "closed":
		closed = ts(mr.updated)
	}
	return map[string]any{
		"id": mr.ID, "iid": mr.IID, "project_id": p.id, "title": mr.Title, "description": "", "state": mr.State,
		"created_at": ts(mr.created), "updated_at": ts(mr.updated), "merged_at": merged, "closed_at": closed,
		"target_branch": mr.TargetBranch, "source_branch": mr.SourceBranch, "source_project_id": p.id,
		"target_project_id": p.id, "author": bot, "draft": mr.Draft, "work_in_progress": mr.Draft,
		"labels": []string{}, "merge_status": "can_be_merged", "detailed_merge_status": "mergeable",
		"sha": mr.SHA, "merge_commit_sha": nil, "squash_commit_sha": nil, "user_notes_count": len(mr.notes),
		"references": map[string]string{"short": fmt.Sprintf("!%d", mr.IID), "relative": fmt.Sprintf("!%d", mr.IID),
			"full": fmt.Sprintf("%s!%d", p.path, mr.IID)},
		"web_url": fmt.Sprintf("%s/-/merge_requests/%d", s.webURL(p), mr.IID),
	}
}

func noteJSON(mr *mergeRequest, n *note) map[string]any {
	return map[string]any{
		"id": n.ID, "type": nil, "body": n.Body, "attachment": nil, "author": n.author,
		"created_at": ts(n.created), "updated_at": ts(n.updated), "system": n.System,
		"noteable_id": mr.ID, "noteable_type": "MergeRequest", "noteable_iid": mr.IID, "project_id": mr.project.id,
		"resolvable": false, "confidential": false, "internal": false, "imported": false, "imported_from": "none",
	}
}

// routeMergeRequests answers /projects/:id/merge_requests[/...]: the list,
// one merge request, and its notes.
func (s *Server) routeMergeRequests(req *http.Request, p *project, c caller, seg []string, body []byte, get, post, put bool) reply {
	if len(seg) == 0 {
		if get {
			return s.listMergeRequests(req, p)
		}
		return notFound("")
	}
	iid, err := strconv.ParseInt(seg[0], 10, 64)
	if err != nil {
		return notFound("")
	}
	s.mu.Lock()
	mr := p.mr(iid)
	s.mu.Unlock()
	if mr == nil {
		return notFound("")
	}
	switch {
	case len(seg) == 1 && get:
		s.mu.Lock()
		defer s.mu.Unlock()
		return jsonReply(http.StatusOK, s.mrJSON(mr))
	case len(seg) == 2 && seg[1] == "notes" && get:
		return s.listNotes(req, mr)
	case len(seg) == 2 && seg[1] == "notes" && post:
		return s.createNote(req, mr, c, body)
	case len(seg) == 3 && seg[1] == "notes" && (put || get):
		id, err := strconv.ParseInt(seg[2], 10, 64)
		if err != nil {
			return notFound("")
		}
		return s.noteByID(req, mr, c, id, body, put)
	}
	return notFound("")
}

// listMergeRequests answers GET /projects/:id/merge_requests, filtered by
// state (all by default), target_branch and source_branch, newest first.
func (s *Server) listMergeRequests(req *http.Request, p *project) reply {
	q := req.URL.Query()
	state := cmp.Or(q.Get("state"), "all")
	if !slices.Contains([]string{"all", "opened", "closed", "merged", "locked"}, state) {
		return paramError("state does not have a valid value")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for i := len(p.mrs) - 1; i >= 0; i-- {
		mr := p.mrs[i]
		if state != "all" && mr.State != state ||
			q.Get("target_branch") != "" && mr.TargetBranch != q.Get("target_branch") ||
			q.Get("source_branch") != "" && mr.SourceBranch != q.Get("source_branch") {
			continue
		}
		out = append(out, s.mrJSON(mr))
	}
	return listReply(s.paginate(req, len(out)), out)
}

// listNotes answers GET .../merge_requests/:iid/notes, ordered by
// order_by (created_at, the default, or updated_at) and sort (desc, the
// default, or asc), paginated.
func (s *Server) listNotes(req *http.Request, mr *mergeRequest) reply {
	q := req.URL.Query()
	sortDir := cmp.Or(q.Get("sort"), "desc")
	orderBy := cmp.Or(q.Get("order_by"), "created_at")
	if sortDir != "asc" && sortDir != "desc" {
		return paramError("sort does not have a valid value")
	}
	if orderBy != "created_at" && orderBy != "updated_at" {
		return paramError("order_by does not have a valid value")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	notes := slices.Clone(mr.notes)
	slices.SortStableFunc(notes, func(a, b *note) int {
		ka, kb := a.created, b.created
		if orderBy == "updated_at" {
			ka, kb = a.updated, b.updated
		}
		c := cmp.Or(ka.Compare(kb), cmp.Compare(a.ID, b.ID))
		if sortDir == "desc" {
			return -c
		}
		return c
	})
	out := make([]map[string]any, len(notes))
	for i, n := range notes {
		out[i] = noteJSON(mr, n)
	}
	return listReply(s.paginate(req, len(out)), out)
}

// noteBody reads and checks a note's body as GitLab does.
func noteBody(req *http.Request, body []byte) (string, reply, bool) {
	params, ok := decodeBody(req, body)
	if !ok {
		return "", paramError("The provided content-type '" + req.Header.Get("Content-Type") + "' is not supported."), false
	}
	text, ok := str(params, "body")
	if !ok || text == "" {
		return "", paramError("body is missing"), false
	}
	if utf8.RuneCountInString(text) > MaxNoteLength {
		return "", message(http.StatusBadRequest, fmt.Sprintf(`Note {:note=>["is too long (maximum is %d characters)"]}`, MaxNoteLength)), false
	}
	return text, reply{}, true
}

// createNote answers POST .../merge_requests/:iid/notes; a Reporter may
// comment, as in GitLab, and the note's quick actions run.
func (s *Server) createNote(req *http.Request, mr *mergeRequest, c caller, body []byte) reply {
	text, rep, ok := noteBody(req, body)
	if !ok {
		return rep
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.addNote(mr, c.user, s.runQuickActions(mr, text), false)
	return jsonReply(http.StatusCreated, noteJSON(mr, n))
}

// noteByID answers GET and PUT .../notes/:id; only a note's author may
// edit it, and system notes not at all.
func (s *Server) noteByID(req *http.Request, mr *mergeRequest, c caller, id int64, body []byte, put bool) reply {
	s.mu.Lock()
	i := slices.IndexFunc(mr.notes, func(n *note) bool { return n.ID == id })
	s.mu.Unlock()
	if i < 0 {
		return notFound("Note")
	}
	if !put {
		s.mu.Lock()
		defer s.mu.Unlock()
		return jsonReply(http.StatusOK, noteJSON(mr, mr.notes[i]))
	}
	text, rep, ok := noteBody(req, body)
	if !ok {
		return rep
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := mr.notes[i]
	if n.System || n.author.Username != c.user.Username {
		return forbidden()
	}
	// GitLab runs the quick actions of an edited note too.
	n.Body, n.updated = s.runQuickActions(mr, text), s.now()
	n.Updates++
	return jsonReply(http.StatusOK, noteJSON(mr, n))
}
