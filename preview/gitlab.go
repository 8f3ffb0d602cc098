package preview

import (
	"context"
	"errors"
	"fmt"
	"strings"
	gosync "sync"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/webhook"
)

// Limits of what the GitLab host reads.
const (
	// maxGitLabNote is GitLab's limit on a note's length, in characters: a
	// comment cut to as many bytes keeps within it.
	maxGitLabNote = 1_000_000
	// maxMergeRequestPages bounds the pages of open merge requests listed
	// (100 each).
	maxMergeRequestPages = 10
	// maxNotePages bounds the pages of a merge request's notes searched
	// for the preview's (100 each).
	maxNotePages = 30
)

// GitLab is a Host on gitlab.com or a self-managed GitLab: merge requests
// of one project, a commit status no8s/plan on their head commit, and one
// note each.
type GitLab struct {
	// Client talks to GitLab with the token for previews, which needs the
	// api scope and the Developer role (Reporter may comment but not set
	// commit statuses).
	Client *gitlab.Client
	// Project is the project's full path, group/sub/project: the target
	// project of the merge requests, where GitLab keeps their refs.
	Project string
	// Retry tunes the retries of calls; the zero value retries after a
	// second, growing to a minute.
	Retry gitlabapi.Retrier

	mu gosync.Mutex
	// user is the token's user name, once known: only notes it wrote can
	// be edited.
	user string
	// notes are the ids of the preview notes found or written, by merge
	// request and marker: a note is looked up by its id first, so that
	// one beyond the pages searched (a merge request flooded with notes)
	// is edited, not written again at every push.
	notes map[noteKey]int64
}

type noteKey struct {
	iid    int64
	marker string
}

// Open lists the open merge requests into branch, up to a thousand.
func (g *GitLab) Open(ctx context.Context, branch string) ([]Pull, error) {
	var open []Pull
	opt := &gitlab.ListProjectMergeRequestsOptions{State: gitlab.Ptr("opened"), TargetBranch: gitlab.Ptr(branch),
		ListOptions: gitlab.ListOptions{PerPage: 100, Page: 1}}
	for range maxMergeRequestPages {
		var mrs []*gitlab.BasicMergeRequest
		var next int64
		err := g.Retry.Call(ctx, func() (*gitlab.Response, error) {
			var resp *gitlab.Response
			var err error
			mrs, resp, err = g.Client.MergeRequests.ListProjectMergeRequests(g.Project, opt, gitlab.WithContext(ctx))
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list the open merge requests of %s: %w", g.Project, err)
		}
		for _, mr := range mrs {
			open = append(open, Pull{Number: int(mr.IID), HeadSHA: mr.SHA, BaseRef: mr.TargetBranch})
		}
		if next == 0 {
			break
		}
		opt.Page = next
	}
	return open, nil
}

// SetStatus sets the commit status no8s/plan, in GitLab's words (see
// gitlabapi.CommitState: pending is running), moving the one there is
// rather than adding one: a status left running by an agent that stopped
// mid-preview gets its outcome from the next preview.
func (g *GitLab) SetStatus(ctx context.Context, sha, state, desc string) error {
	st, desc := gitlabapi.CommitState(state, desc)
	err := gitlabapi.SetStatus(ctx, g.Client, g.Retry, g.Project, sha, gitlab.SetCommitStatusOptions{
		State: st, Name: gitlab.Ptr(StatusContext), Description: gitlab.Ptr(desc)})
	if err != nil {
		return fmt.Errorf("set the status of %s: %w", short(sha), err)
	}
	return nil
}

// Comment edits the merge request's note that starts with marker and that
// the token's user wrote, or creates it. GitLab lets only a note's author
// edit it: a marked note someone else wrote (copied, or left by another
// agent's token) is passed over, not edited, and does not stop the
// preview from having its own. The note found or written is remembered
// and read by its id at the next preview; only a host that does not know
// it yet searches the merge request's notes, oldest first and up to
// maxNotePages pages.
func (g *GitLab) Comment(ctx context.Context, number int, marker, body string) error {
	body = noQuickActions(asGitLabKeeps(body))
	me, err := g.me(ctx)
	if err != nil {
		return err
	}
	iid := int64(number)
	key := noteKey{iid, marker}
	err = g.Retry.CallOnce(ctx, func() (bool, error) {
		n, err := g.knownNote(ctx, key, me)
		if err == nil && n == nil {
			n, err = g.findNote(ctx, iid, marker, me)
		}
		if err != nil || n == nil {
			return false, err
		}
		g.remember(key, n.ID)
		if n.Body == body {
			return true, nil
		}
		// An edit is safe to repeat: the Retrier retries it.
		return true, g.Retry.Call(ctx, func() (*gitlab.Response, error) {
			_, resp, err := g.Client.Notes.UpdateMergeRequestNote(g.Project, iid, n.ID,
				&gitlab.UpdateMergeRequestNoteOptions{Body: gitlab.Ptr(body)}, gitlab.WithContext(ctx))
			return resp, err
		})
	}, func() (*gitlab.Response, error) {
		n, resp, err := g.Client.Notes.CreateMergeRequestNote(g.Project, iid,
			&gitlab.CreateMergeRequestNoteOptions{Body: gitlab.Ptr(body)}, gitlab.WithContext(ctx))
		if err == nil && n != nil {
			g.remember(key, n.ID)
		}
		return resp, err
	})
	if err != nil {
		return fmt.Errorf("comment on %s: %w", g.Name(number), err)
	}
	return nil
}

// asGitLabKeeps is a note's body as GitLab stores it: its quick-action
// extractor takes out carriage returns and trailing whitespace. A note
// compared with the body as sent would differ at every preview, and be
// edited again and again.
func asGitLabKeeps(body string) string {
	return strings.TrimRight(strings.ReplaceAll(body, "\r", ""), "\x00\t\n\v\f\r ")
}

// knownNote returns the note remembered for key, when it is still there,
// still the user's and still the preview's, or nil.
func (g *GitLab) knownNote(ctx context.Context, key noteKey, user string) (*gitlab.Note, error) {
	g.mu.Lock()
	id, ok := g.notes[key]
	g.mu.Unlock()
	if !ok {
		return nil, nil
	}
	var n *gitlab.Note
	err := g.Retry.Call(ctx, func() (*gitlab.Response, error) {
		var resp *gitlab.Response
		var err error
		n, resp, err = g.Client.Notes.GetMergeRequestNote(g.Project, key.iid, id, gitlab.WithContext(ctx))
		return resp, err
	})
	if errors.Is(err, gitlab.ErrNotFound) || err == nil && !mine(n, key.marker, user) {
		g.mu.Lock()
		delete(g.notes, key)
		g.mu.Unlock()
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read note %d of !%d: %w", id, key.iid, err)
	}
	return n, nil
}

// remember keeps the id of the note found or written for key.
func (g *GitLab) remember(key noteKey, id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.notes == nil {
		g.notes = map[noteKey]int64{}
	}
	g.notes[key] = id
}

// mine reports whether n is a preview's note with marker that user wrote.
func mine(n *gitlab.Note, marker, user string) bool {
	return n != nil && !n.System && strings.HasPrefix(n.Body, marker) && strings.EqualFold(n.Author.Username, user)
}

// noQuickActions indents by a space every line of body that starts with
// a slash. GitLab runs such a line of a note, /merge or /approve, as a
// quick action with the rights of the note's writer, the agent's token,
// wherever its extractor does not see a code block (a fence longer than
// ```, or one cut open, is none to it). The preview's Markdown never
// starts a line with data; this holds whatever renders the body.
func noQuickActions(body string) string {
	if !strings.HasPrefix(body, "/") && !strings.Contains(body, "\n/") {
		return body
	}
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "/") {
			lines[i] = " " + l
		}
	}
	return strings.Join(lines, "\n")
}

// findNote returns the oldest note of the merge request that starts with
// marker and that user wrote, or nil.
func (g *GitLab) findNote(ctx context.Context, iid int64, marker, user string) (*gitlab.Note, error) {
	opt := &gitlab.ListMergeRequestNotesOptions{OrderBy: gitlab.Ptr("created_at"), Sort: gitlab.Ptr("asc"),
		ListOptions: gitlab.ListOptions{PerPage: 100, Page: 1}}
	for range maxNotePages {
		var notes []*gitlab.Note
		var next int64
		err := g.Retry.Call(ctx, func() (*gitlab.Response, error) {
			var resp *gitlab.Response
			var err error
			notes, resp, err = g.Client.Notes.ListMergeRequestNotes(g.Project, iid, opt, gitlab.WithContext(ctx))
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list the notes of !%d: %w", iid, err)
		}
		for _, n := range notes {
			if mine(n, marker, user) {
				return n, nil
			}
		}
		if next == 0 {
			break
		}
		opt.Page = next
	}
	return nil, nil
}

// me returns the token's user name, asking GitLab the first time.
func (g *GitLab) me(ctx context.Context) (string, error) {
	g.mu.Lock()
	user := g.user
	g.mu.Unlock()
	if user != "" {
		return user, nil
	}
	var u *gitlab.User
	err := g.Retry.Call(ctx, func() (*gitlab.Response, error) {
		var resp *gitlab.Response
		var err error
		u, resp, err = g.Client.Users.CurrentUser(gitlab.WithContext(ctx))
		return resp, err
	})
	if err != nil {
		return "", fmt.Errorf("find the token's user: %w", err)
	}
	if u.Username == "" {
		return "", fmt.Errorf("find the token's user: GitLab named none")
	}
	g.mu.Lock()
	g.user = u.Username
	g.mu.Unlock()
	return u.Username, nil
}

// MaxComment is GitLab's limit on a note.
func (g *GitLab) MaxComment() int { return maxGitLabNote }

// Name is "merge request !N".
func (g *GitLab) Name(number int) string { return fmt.Sprintf("merge request !%d", number) }

// OnMergeRequest handles a verified Merge Request Hook delivery for every
// source of the merge request's target project whose branch it targets:
// open, reopen and an update that brings new commits (oldrev set) preview
// the merge request at its last commit; close and merge stop previewing
// it. An update that retargets the merge request starts or stops its
// previews as its new target branch says. Other updates (title, labels,
// approvals) change nothing a preview shows.
func (p *Previewer) OnMergeRequest(ctx context.Context, ev *gitlab.MergeEvent) error {
	mr := ev.ObjectAttributes
	pr := ev.Project
	urls := []string{pr.GitHTTPURL, pr.GitSSHURL, pr.WebURL, pr.HTTPURL, pr.SSHURL, pr.URL}
	// object_attributes.target is the target project too; the source
	// project may be a fork, whose URLs say nothing of the source.
	for _, r := range []*gitlab.Repository{mr.Target, ev.Repository} {
		if r != nil {
			urls = append(urls, r.GitHTTPURL, r.GitSSHURL, r.WebURL, r.HTTPURL, r.SSHURL, r.URL, r.Homepage)
		}
	}
	keys := map[string]bool{}
	for _, u := range urls {
		if k := webhook.RepoKey(u); k != "" {
			keys[k] = true
		}
	}
	retargeted := mr.Action == "update" && ev.Changes.TargetBranch.Previous != "" &&
		ev.Changes.TargetBranch.Previous != ev.Changes.TargetBranch.Current
	pull := Pull{Number: int(mr.IID), HeadSHA: mr.LastCommit.ID, BaseRef: mr.TargetBranch}
	for name, w := range p.sources {
		if !keys[webhook.RepoKey(w.src.Target.URL)] {
			continue
		}
		if mr.TargetBranch != w.src.Branch {
			if retargeted && ev.Changes.TargetBranch.Previous == w.src.Branch {
				p.Forget(name, pull.Number)
			}
			continue
		}
		switch mr.Action {
		case "open", "reopen":
			p.Request(name, pull)
		case "update":
			if mr.State == "opened" && (mr.OldRev != "" || retargeted) {
				p.Request(name, pull)
			}
		case "close", "merge":
			p.Forget(name, pull.Number)
		}
	}
	return nil
}
