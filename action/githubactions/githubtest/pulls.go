package githubtest

// The endpoints a pull request preview needs: listing and reading the
// repository's pull requests, commit statuses on their head commits, and
// the comments of their conversations.

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits GitHub applies to pull request previews that the server applies
// too, counted in characters (code points).
const (
	// MaxStatusDescription is how long a commit status's description may be.
	MaxStatusDescription = 140
	// MaxCommentBody is how long an issue or pull request comment may be.
	MaxCommentBody = 65536
)

// Defaults of Pull.
const (
	// DefaultPullAuthor is who opened a pull request when Pull.Author is
	// empty.
	DefaultPullAuthor = "octocat"
	// DefaultBaseRef is a pull request's base branch when Pull.BaseRef is
	// empty.
	DefaultBaseRef = "main"
)

// Documentation URLs of the pull request endpoints' errors.
const (
	docsListPulls     = "https://docs.github.com/rest/pulls/pulls#list-pull-requests"
	docsCreateStatus  = "https://docs.github.com/rest/commits/statuses#create-a-commit-status"
	docsCreateComment = "https://docs.github.com/rest/issues/comments#create-an-issue-comment"
	docsUpdateComment = "https://docs.github.com/rest/issues/comments#update-an-issue-comment"
)

// Pull is a pull request of the server's repository, as a test sets it.
type Pull struct {
	// Number is the pull request's number, above 0.
	Number int
	// Title is the pull request's title.
	Title string
	// HeadRef is the branch the changes are on; by default "pr-<Number>".
	HeadRef string
	// HeadSHA is the head commit, 40 hex digits; by default a stable
	// commit id derived from HeadRef.
	HeadSHA string
	// BaseRef is the branch the changes go into; by default DefaultBaseRef.
	BaseRef string
	// State is open or closed; empty means open.
	State string
	// Merged says the pull request was merged; it implies State closed.
	Merged bool
	// Author is the login of who opened the pull request; by default
	// DefaultPullAuthor.
	Author string
	// HeadRepo is the full name (owner/name) of the repository HeadRef is
	// in, another one for a pull request from a fork; by default the
	// server's repository.
	HeadRepo string
}

// Status is a commit status created through the API.
type Status struct {
	// State is error, failure, pending or success.
	State string
	// Description is the status's short description.
	Description string
	// TargetURL is the URL the status links to.
	TargetURL string
	// Context is the status's label; "default" when the request gave none.
	Context string
}

// Comment is a comment on a pull request's conversation.
type Comment struct {
	// ID is the comment's id.
	ID int64
	// User is the login of the comment's author: the token's user for
	// comments created through the API.
	User string
	// Body is the comment's text, as last edited.
	Body string
	// Edits counts the edits of the comment through the API.
	Edits int
}

// prState is the server's pull requests, statuses and comments, guarded by
// Server.mu; its zero value is empty and ready.
type prState struct {
	pulls       map[int]*pull
	statuses    map[string][]*status // by lower-case sha, oldest first
	comments    map[int64]*comment
	seq         int // creations of pull requests
	updates     int // updates of pull requests
	nextStatus  int64
	nextComment int64
}

type pull struct {
	Pull
	seq       int // order of creation
	updSeq    int // order of last update
	createdAt time.Time
	updatedAt time.Time
	closedAt  time.Time
	mergedAt  time.Time
	comments  []*comment // oldest first
}

type status struct {
	id  int64
	sha string
	Status
	at time.Time
}

type comment struct {
	id        int64
	number    int
	user      string
	body      string
	edits     int
	createdAt time.Time
	updatedAt time.Time
}

func (s *Server) now() time.Time { return s.opts.Now().UTC().Truncate(time.Second) }

// SetPull creates the pull request p.Number, or replaces it keeping its
// comments, statuses and creation time; its update time becomes now. The
// defaults of Pull's fields fill empty ones. It panics when p.Number is not
// above 0, or p.State is neither empty, open nor closed.
func (s *Server) SetPull(p Pull) {
	if p.Number <= 0 {
		panic(fmt.Sprintf("githubtest: pull request number %d", p.Number))
	}
	switch p.State {
	case "":
		p.State = "open"
	case "open", "closed":
	default:
		panic(fmt.Sprintf("githubtest: pull request state %q", p.State))
	}
	if p.Merged {
		p.State = "closed"
	}
	if p.HeadRef == "" {
		p.HeadRef = fmt.Sprintf("pr-%d", p.Number)
	}
	if p.HeadSHA == "" {
		p.HeadSHA = headSHA(p.HeadRef)
	}
	p.HeadSHA = strings.ToLower(p.HeadSHA)
	if p.BaseRef == "" {
		p.BaseRef = DefaultBaseRef
	}
	if p.Author == "" {
		p.Author = DefaultPullAuthor
	}
	if p.HeadRepo == "" {
		p.HeadRepo = s.opts.Owner + "/" + s.opts.Repo
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.pr
	if st.pulls == nil {
		st.pulls = map[int]*pull{}
	}
	pr, ok := st.pulls[p.Number]
	if !ok {
		st.seq++
		pr = &pull{seq: st.seq, createdAt: now}
		st.pulls[p.Number] = pr
	}
	wasClosed, wasMerged := ok && pr.State == "closed", ok && pr.Merged
	pr.Pull = p
	switch {
	case p.State == "open":
		pr.closedAt = time.Time{}
	case !wasClosed:
		pr.closedAt = now
	}
	switch {
	case !p.Merged:
		pr.mergedAt = time.Time{}
	case !wasMerged:
		pr.mergedAt = now
	}
	s.touch(pr, now)
}

// touch marks the pull request updated at now; s.mu is held.
func (s *Server) touch(pr *pull, now time.Time) {
	s.pr.updates++
	pr.updSeq, pr.updatedAt = s.pr.updates, now
}

// AddComment adds a comment by user (a login) to the pull request number,
// as if that user wrote it on GitHub, and returns its id; false when there
// is no such pull request.
func (s *Server) AddComment(number int, user, body string) (int64, bool) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	pr, ok := s.pr.pulls[number]
	if !ok {
		return 0, false
	}
	return s.addComment(pr, user, body, now).id, true
}

// addComment appends a comment to pr; s.mu is held.
func (s *Server) addComment(pr *pull, user, body string, now time.Time) *comment {
	st := &s.pr
	if st.comments == nil {
		st.comments = map[int64]*comment{}
		st.nextComment = 1_900_000_000
	}
	st.nextComment++
	c := &comment{id: st.nextComment, number: pr.Number, user: user, body: body, createdAt: now, updatedAt: now}
	st.comments[c.id] = c
	pr.comments = append(pr.comments, c)
	s.touch(pr, now)
	return c
}

// Statuses returns the statuses created on the commit sha through the API,
// oldest first.
func (s *Server) Statuses(sha string) []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Status
	for _, st := range s.pr.statuses[strings.ToLower(sha)] {
		out = append(out, st.Status)
	}
	return out
}

// Comments returns the comments of the pull request number, oldest first;
// nil when there is no such pull request.
func (s *Server) Comments(number int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr, ok := s.pr.pulls[number]
	if !ok {
		return nil
	}
	out := make([]Comment, len(pr.comments))
	for i, c := range pr.comments {
		out[i] = Comment{ID: c.id, User: c.user, Body: c.body, Edits: c.edits}
	}
	return out
}

// routePulls dispatches an authenticated request for repos/{owner}/{repo}/
// outside actions/: seg is the path's segments, from "repos".
func (s *Server) routePulls(req *http.Request, body []byte, enterprise bool, seg []string) reply {
	if !strings.EqualFold(seg[1], s.opts.Owner) || !strings.EqualFold(seg[2], s.opts.Repo) {
		return notFound()
	}
	base := s.base(enterprise)
	seg = seg[3:]
	n := len(seg)
	get, post, patch := req.Method == http.MethodGet, req.Method == http.MethodPost, req.Method == http.MethodPatch
	switch {
	case seg[0] == "pulls" && n == 1 && get:
		return s.listPulls(req, base)
	case seg[0] == "pulls" && n == 2 && get:
		number, ok := positive(seg[1])
		if !ok {
			return notFound()
		}
		return s.getPull(base, number)
	case seg[0] == "statuses" && n >= 2 && post:
		return s.createStatus(base, strings.Join(seg[1:], "/"), body)
	case seg[0] == "commits" && n >= 3 && seg[n-1] == "statuses" && get:
		return s.listStatuses(req, base, strings.Join(seg[1:n-1], "/"))
	case seg[0] == "issues" && n == 3 && seg[1] == "comments" && (get || patch):
		id, err := strconv.ParseInt(seg[2], 10, 64)
		if err != nil {
			return notFound()
		}
		if get {
			return s.getComment(base, id)
		}
		return s.editComment(base, id, body)
	case seg[0] == "issues" && n == 3 && seg[2] == "comments" && (get || post):
		number, ok := positive(seg[1])
		if !ok {
			return notFound()
		}
		if get {
			return s.listComments(req, base, number)
		}
		return s.createComment(base, number, body)
	}
	return notFound()
}

func positive(v string) (int, bool) {
	n, err := strconv.Atoi(v)
	return n, err == nil && n > 0
}

// fieldError is an entry of the errors of GitHub's Validation Failed.
type fieldError struct {
	Resource string `json:"resource"`
	Code     string `json:"code"`
	Field    string `json:"field"`
	Message  string `json:"message,omitempty"`
}

// validationFailed is GitHub's 422 for a request that fails its model's
// validations.
func validationFailed(docs string, errs ...fieldError) reply {
	return jsonReply(http.StatusUnprocessableEntity, struct {
		Message          string       `json:"message"`
		Errors           []fieldError `json:"errors"`
		DocumentationURL string       `json:"documentation_url"`
		Status           string       `json:"status"`
	}{"Validation Failed", errs, docs, strconv.Itoa(http.StatusUnprocessableEntity)})
}

// decodeBody reads a JSON object of string fields into v as GitHub's
// schema validation does: 400 for a body that is not a JSON object, 422
// for a field of the wrong type.
func decodeBody(body []byte, v any, docs string) (reply, bool) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return errorReply(http.StatusBadRequest, "Problems parsing JSON", docs), false
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return errorReply(http.StatusUnprocessableEntity,
				fmt.Sprintf("Invalid request.\n\nFor 'properties/%s', %s is not a %s.", te.Field, raw[te.Field], te.Type.Kind()), docs), false
		}
		return errorReply(http.StatusBadRequest, "Problems parsing JSON", docs), false
	}
	return reply{}, true
}

// userOf is the user object of login; the token's user is actor.
func userOf(login string) userJSON {
	if login == actor.Login {
		return actor
	}
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(login)))
	kind := "User"
	if strings.HasSuffix(login, "[bot]") {
		kind = "Bot"
	}
	return userJSON{Login: login, ID: 100_000 + int64(h.Sum32()%100_000_000), Type: kind}
}

type prRepoJSON struct {
	repoJSON
	Fork     bool   `json:"fork"`
	CloneURL string `json:"clone_url"`
}

type branchJSON struct {
	Label string     `json:"label"`
	Ref   string     `json:"ref"`
	SHA   string     `json:"sha"`
	User  userJSON   `json:"user"`
	Repo  prRepoJSON `json:"repo"`
}

type pullJSON struct {
	URL               string     `json:"url"`
	ID                int64      `json:"id"`
	NodeID            string     `json:"node_id"`
	HTMLURL           string     `json:"html_url"`
	DiffURL           string     `json:"diff_url"`
	PatchURL          string     `json:"patch_url"`
	IssueURL          string     `json:"issue_url"`
	CommitsURL        string     `json:"commits_url"`
	ReviewCommentsURL string     `json:"review_comments_url"`
	CommentsURL       string     `json:"comments_url"`
	StatusesURL       string     `json:"statuses_url"`
	Number            int        `json:"number"`
	State             string     `json:"state"`
	Locked            bool       `json:"locked"`
	Title             string     `json:"title"`
	User              userJSON   `json:"user"`
	Body              *string    `json:"body"`
	CreatedAt         string     `json:"created_at"`
	UpdatedAt         string     `json:"updated_at"`
	ClosedAt          *string    `json:"closed_at"`
	MergedAt          *string    `json:"merged_at"`
	Draft             bool       `json:"draft"`
	Head              branchJSON `json:"head"`
	Base              branchJSON `json:"base"`
	AuthorAssociation string     `json:"author_association"`
	// Only when one pull request is read.
	Merged   *bool `json:"merged,omitempty"`
	Comments *int  `json:"comments,omitempty"`
}

// repoOf is the repository full (owner/name) as a pull request's branch
// shows it.
func (s *Server) repoOf(base, full string) prRepoJSON {
	own := strings.EqualFold(full, s.opts.Owner+"/"+s.opts.Repo)
	r := prRepoJSON{repoJSON: s.repoJSON(base), Fork: !own, CloneURL: htmlBase + "/" + full + ".git"}
	if !own {
		owner, name, _ := strings.Cut(full, "/")
		h := fnv.New32a()
		h.Write([]byte(strings.ToLower(full)))
		id := 800_000_000 + int64(h.Sum32()%100_000_000)
		r.repoJSON = repoJSON{ID: id, NodeID: nodeID("R_", id), Name: name, FullName: full, Private: true,
			Owner: userOf(owner), HTMLURL: htmlBase + "/" + full, URL: base + "/repos/" + full}
	}
	return r
}

func (s *Server) pullJSON(base string, pr *pull, detail bool) pullJSON {
	repoURL := base + s.repoPath()
	issueURL := fmt.Sprintf("%s/issues/%d", repoURL, pr.Number)
	u := fmt.Sprintf("%s/pulls/%d", repoURL, pr.Number)
	html := fmt.Sprintf("%s/%s/%s/pull/%d", htmlBase, s.opts.Owner, s.opts.Repo, pr.Number)
	head, baseRepo := s.repoOf(base, pr.HeadRepo), s.repoOf(base, s.opts.Owner+"/"+s.opts.Repo)
	id := 1_800_000_000 + int64(pr.Number)
	j := pullJSON{
		URL: u, ID: id, NodeID: nodeID("PR_", id), HTMLURL: html, DiffURL: html + ".diff", PatchURL: html + ".patch",
		IssueURL: issueURL, CommitsURL: u + "/commits", ReviewCommentsURL: u + "/comments", CommentsURL: issueURL + "/comments",
		StatusesURL: repoURL + "/statuses/" + pr.HeadSHA, Number: pr.Number, State: pr.State, Title: pr.Title,
		User: userOf(pr.Author), CreatedAt: formatTime(pr.createdAt), UpdatedAt: formatTime(pr.updatedAt),
		ClosedAt: nullableTime(pr.closedAt), MergedAt: nullableTime(pr.mergedAt),
		Head: branchJSON{Label: head.Owner.Login + ":" + pr.HeadRef, Ref: pr.HeadRef, SHA: pr.HeadSHA, User: head.Owner, Repo: head},
		Base: branchJSON{Label: baseRepo.Owner.Login + ":" + pr.BaseRef, Ref: pr.BaseRef, SHA: headSHA(pr.BaseRef),
			User: baseRepo.Owner, Repo: baseRepo},
		AuthorAssociation: "CONTRIBUTOR",
	}
	if detail {
		merged, comments := pr.Merged, len(pr.comments)
		j.Merged, j.Comments = &merged, &comments
	}
	return j
}

// listPulls lists pull requests by GitHub's filters state, head and base,
// sorted by sort (created, updated, popularity or long-running; the last
// two sort as created) and direction.
func (s *Server) listPulls(req *http.Request, base string) reply {
	q := req.URL.Query()
	state := q.Get("state")
	switch state {
	case "":
		state = "open"
	case "open", "closed", "all":
	default:
		return validationFailed(docsListPulls, fieldError{Resource: "PullRequest", Code: "invalid", Field: "state",
			Message: "state is not included in the list"})
	}
	sortBy := q.Get("sort")
	desc := sortBy == "" || sortBy == "created"
	switch q.Get("direction") {
	case "asc":
		desc = false
	case "desc":
		desc = true
	}
	headOwner, headRef, hasOwner := strings.Cut(q.Get("head"), ":")
	if !hasOwner {
		headOwner, headRef = "", headOwner
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var prs []*pull
	for _, pr := range s.pr.pulls {
		if state != "all" && pr.State != state {
			continue
		}
		if b := q.Get("base"); b != "" && b != pr.BaseRef {
			continue
		}
		if headRef != "" && headRef != pr.HeadRef {
			continue
		}
		if owner, _, _ := strings.Cut(pr.HeadRepo, "/"); headOwner != "" && !strings.EqualFold(headOwner, owner) {
			continue
		}
		prs = append(prs, pr)
	}
	key := func(pr *pull) int { return pr.seq }
	if sortBy == "updated" {
		key = func(pr *pull) int { return pr.updSeq }
	}
	slices.SortFunc(prs, func(a, b *pull) int {
		if desc {
			return key(b) - key(a)
		}
		return key(a) - key(b)
	})
	page, link := s.paginate(req, len(prs))
	out := []pullJSON{}
	for _, pr := range prs[page.from:page.to] {
		out = append(out, s.pullJSON(base, pr, false))
	}
	rep := jsonReply(http.StatusOK, out)
	rep.headers = link
	return rep
}

func (s *Server) getPull(base string, number int) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr, ok := s.pr.pulls[number]
	if !ok {
		return notFound()
	}
	return jsonReply(http.StatusOK, s.pullJSON(base, pr, true))
}

type statusJSON struct {
	URL         string   `json:"url"`
	AvatarURL   string   `json:"avatar_url"`
	ID          int64    `json:"id"`
	NodeID      string   `json:"node_id"`
	State       string   `json:"state"`
	Description *string  `json:"description"`
	TargetURL   *string  `json:"target_url"`
	Context     string   `json:"context"`
	CreatedAt   string   `json:"created_at"`
	UpdatedAt   string   `json:"updated_at"`
	Creator     userJSON `json:"creator"`
}

func (s *Server) statusJSON(base string, st *status) statusJSON {
	return statusJSON{
		URL: fmt.Sprintf("%s%s/statuses/%s", base, s.repoPath(), st.sha), AvatarURL: "https://avatars.githubusercontent.com/u/1?v=4",
		ID: st.id, NodeID: nodeID("SC_", st.id), State: st.State, Description: nullable(st.Description),
		TargetURL: nullable(st.TargetURL), Context: st.Context, CreatedAt: formatTime(st.at), UpdatedAt: formatTime(st.at),
		Creator: actor,
	}
}

func isSHA(v string) bool {
	if len(v) != 40 {
		return false
	}
	for _, c := range v {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// createStatus creates a commit status on sha, which must be a full
// commit id (the server knows no commits, so it takes any).
func (s *Server) createStatus(base, sha string, body []byte) reply {
	var in struct {
		State       *string `json:"state"`
		TargetURL   *string `json:"target_url"`
		Description *string `json:"description"`
		Context     *string `json:"context"`
	}
	if rep, ok := decodeBody(body, &in, docsCreateStatus); !ok {
		return rep
	}
	if !isSHA(sha) {
		return errorReply(http.StatusUnprocessableEntity, "No commit found for SHA: "+sha, docsCreateStatus)
	}
	if in.State == nil {
		return errorReply(http.StatusUnprocessableEntity, "Invalid request.\n\n\"state\" wasn't supplied.", docsCreateStatus)
	}
	var errs []fieldError
	switch *in.State {
	case "error", "failure", "pending", "success":
	default:
		errs = append(errs, fieldError{Resource: "Status", Code: "custom", Field: "state", Message: "state is not included in the list"})
	}
	st := &status{sha: strings.ToLower(sha), Status: Status{State: *in.State, Context: "default"}}
	if in.Description != nil {
		st.Description = *in.Description
	}
	if utf8.RuneCountInString(st.Description) > MaxStatusDescription {
		errs = append(errs, fieldError{Resource: "Status", Code: "custom", Field: "description",
			Message: fmt.Sprintf("description is too long (maximum is %d characters)", MaxStatusDescription)})
	}
	if len(errs) > 0 {
		return validationFailed(docsCreateStatus, errs...)
	}
	if in.TargetURL != nil {
		st.TargetURL = *in.TargetURL
	}
	if in.Context != nil && *in.Context != "" {
		st.Context = *in.Context
	}
	st.at = s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &s.pr
	if p.statuses == nil {
		p.statuses = map[string][]*status{}
		p.nextStatus = 25_000_000_000
	}
	p.nextStatus++
	st.id = p.nextStatus
	p.statuses[st.sha] = append(p.statuses[st.sha], st)
	return jsonReply(http.StatusCreated, s.statusJSON(base, st))
}

// listStatuses lists the statuses of ref, newest first. ref is a commit
// id, or the head branch of a pull request from the server's repository
// (refs/heads/ optional), which stands for its head commit.
func (s *Server) listStatuses(req *http.Request, base, ref string) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	sha := strings.ToLower(ref)
	if !isSHA(ref) {
		branch := strings.TrimPrefix(ref, "refs/heads/")
		number := 0
		for _, pr := range s.pr.pulls {
			if pr.HeadRef == branch && strings.EqualFold(pr.HeadRepo, s.opts.Owner+"/"+s.opts.Repo) && pr.Number > number {
				sha, number = pr.HeadSHA, pr.Number
			}
		}
	}
	all := s.pr.statuses[sha]
	page, link := s.paginate(req, len(all))
	out := []statusJSON{}
	for i := page.from; i < page.to; i++ {
		out = append(out, s.statusJSON(base, all[len(all)-1-i]))
	}
	rep := jsonReply(http.StatusOK, out)
	rep.headers = link
	return rep
}

type commentJSON struct {
	URL               string   `json:"url"`
	HTMLURL           string   `json:"html_url"`
	IssueURL          string   `json:"issue_url"`
	ID                int64    `json:"id"`
	NodeID            string   `json:"node_id"`
	User              userJSON `json:"user"`
	CreatedAt         string   `json:"created_at"`
	UpdatedAt         string   `json:"updated_at"`
	AuthorAssociation string   `json:"author_association"`
	Body              string   `json:"body"`
}

func (s *Server) commentJSON(base string, c *comment) commentJSON {
	assoc := "NONE"
	if c.user == actor.Login {
		assoc = "MEMBER"
	}
	return commentJSON{
		URL:      fmt.Sprintf("%s%s/issues/comments/%d", base, s.repoPath(), c.id),
		HTMLURL:  fmt.Sprintf("%s/%s/%s/pull/%d#issuecomment-%d", htmlBase, s.opts.Owner, s.opts.Repo, c.number, c.id),
		IssueURL: fmt.Sprintf("%s%s/issues/%d", base, s.repoPath(), c.number),
		ID:       c.id, NodeID: nodeID("IC_", c.id), User: userOf(c.user),
		CreatedAt: formatTime(c.createdAt), UpdatedAt: formatTime(c.updatedAt), AuthorAssociation: assoc, Body: c.body,
	}
}

// listComments lists the comments of a pull request's conversation, oldest
// first, those updated at or after since when the query gives it.
func (s *Server) listComments(req *http.Request, base string, number int) reply {
	since, err := time.Parse(time.RFC3339, req.URL.Query().Get("since"))
	if err != nil {
		since = time.Time{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pr, ok := s.pr.pulls[number]
	if !ok {
		return notFound()
	}
	var cs []*comment
	for _, c := range pr.comments {
		if !c.updatedAt.Before(since) {
			cs = append(cs, c)
		}
	}
	page, link := s.paginate(req, len(cs))
	out := []commentJSON{}
	for _, c := range cs[page.from:page.to] {
		out = append(out, s.commentJSON(base, c))
	}
	rep := jsonReply(http.StatusOK, out)
	rep.headers = link
	return rep
}

// commentBody reads and validates the body of a comment to create or edit.
func commentBody(body []byte, docs string) (string, reply, bool) {
	var in struct {
		Body *string `json:"body"`
	}
	if rep, ok := decodeBody(body, &in, docs); !ok {
		return "", rep, false
	}
	if in.Body == nil {
		return "", errorReply(http.StatusUnprocessableEntity, "Invalid request.\n\n\"body\" wasn't supplied.", docs), false
	}
	if strings.TrimSpace(*in.Body) == "" {
		return "", validationFailed(docs, fieldError{Resource: "IssueComment", Code: "unprocessable", Field: "data",
			Message: "Body cannot be blank"}), false
	}
	if utf8.RuneCountInString(*in.Body) > MaxCommentBody {
		return "", validationFailed(docs, fieldError{Resource: "IssueComment", Code: "unprocessable", Field: "data",
			Message: fmt.Sprintf("Body is too long (maximum is %d characters)", MaxCommentBody)}), false
	}
	return *in.Body, reply{}, true
}

// createComment adds a comment by the token's user to a pull request.
func (s *Server) createComment(base string, number int, body []byte) reply {
	s.mu.Lock()
	_, ok := s.pr.pulls[number]
	s.mu.Unlock()
	if !ok {
		return notFound()
	}
	text, rep, ok := commentBody(body, docsCreateComment)
	if !ok {
		return rep
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	pr, ok := s.pr.pulls[number]
	if !ok {
		return notFound()
	}
	c := s.addComment(pr, actor.Login, text, now)
	rep = jsonReply(http.StatusCreated, s.commentJSON(base, c))
	rep.headers = map[string]string{"Location": s.commentJSON(base, c).URL}
	return rep
}

func (s *Server) getComment(base string, id int64) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.pr.comments[id]
	if !ok {
		return notFound()
	}
	return jsonReply(http.StatusOK, s.commentJSON(base, c))
}

// editComment replaces a comment's body; the token's user may edit anyone's
// comment, as a maintainer may.
func (s *Server) editComment(base string, id int64, body []byte) reply {
	s.mu.Lock()
	_, ok := s.pr.comments[id]
	s.mu.Unlock()
	if !ok {
		return notFound()
	}
	text, rep, ok := commentBody(body, docsUpdateComment)
	if !ok {
		return rep
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.pr.comments[id]
	c.body, c.updatedAt = text, now
	c.edits++
	return jsonReply(http.StatusOK, s.commentJSON(base, c))
}
