package githubtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
)

const (
	shaA = "1111111111111111111111111111111111111111"
	shaB = "2222222222222222222222222222222222222222"
)

func TestPullsListAndGet(t *testing.T) {
	t.Parallel()
	for _, enterprise := range []bool{false, true} {
		t.Run(fmt.Sprintf("enterprise=%v", enterprise), func(t *testing.T) {
			t.Parallel()
			srv := githubtest.New(t, githubtest.Options{})
			o := srv.Options()
			c := client(t, srv, o.Token, enterprise)
			ctx := context.Background()

			srv.SetPull(githubtest.Pull{Number: 7, Title: "Add the cache", HeadRef: "cache", HeadSHA: shaA, BaseRef: "main"})
			srv.SetPull(githubtest.Pull{Number: 8, Title: "Old idea", HeadRef: "old", BaseRef: "main", State: "closed"})
			srv.SetPull(githubtest.Pull{Number: 9, Title: "Release branch fix", HeadRef: "fix", BaseRef: "release"})
			srv.SetPull(githubtest.Pull{Number: 10, Title: "From a fork", HeadRef: "main", HeadSHA: strings.ToUpper(shaB),
				Author: "outsider", HeadRepo: "outsider/infra"})

			prs, resp, err := c.PullRequests.List(ctx, o.Owner, o.Repo, &github.PullRequestListOptions{State: "open", Base: "main"})
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || resp.Rate.Limit != githubtest.RateLimit || resp.Header.Get("X-RateLimit-Resource") != "core" {
				t.Fatalf("status %d, rate %+v", resp.StatusCode, resp.Rate)
			}
			// Newest first: the fork's, then 7; 8 is closed and 9 goes into release.
			if len(prs) != 2 || prs[0].GetNumber() != 10 || prs[1].GetNumber() != 7 {
				t.Fatalf("pulls %v", prs)
			}
			p := prs[1]
			base := srv.BaseURL()
			if enterprise {
				base = srv.EnterpriseURL()
			}
			full := o.Owner + "/" + o.Repo
			if p.GetState() != "open" || p.GetTitle() != "Add the cache" || p.GetUser().GetLogin() != githubtest.DefaultPullAuthor ||
				p.GetHTMLURL() != "https://github.com/"+full+"/pull/7" || p.GetURL() != base+"repos/"+full+"/pulls/7" ||
				p.GetStatusesURL() != base+"repos/"+full+"/statuses/"+shaA || p.UpdatedAt == nil || p.CreatedAt == nil ||
				p.ClosedAt != nil || p.MergedAt != nil {
				t.Fatalf("pull %v", p)
			}
			if h := p.GetHead(); h.GetRef() != "cache" || h.GetSHA() != shaA || h.GetLabel() != o.Owner+":cache" ||
				h.GetRepo().GetFullName() != full || h.GetRepo().GetCloneURL() != "https://github.com/"+full+".git" || h.GetRepo().GetFork() {
				t.Fatalf("head %v", h)
			}
			if b := p.GetBase(); b.GetRef() != "main" || len(b.GetSHA()) != 40 || b.GetRepo().GetFullName() != full {
				t.Fatalf("base %v", b)
			}
			f := prs[0]
			if h := f.GetHead(); h.GetRepo().GetFullName() != "outsider/infra" || !h.GetRepo().GetFork() ||
				h.GetRepo().GetCloneURL() != "https://github.com/outsider/infra.git" || h.GetSHA() != shaB ||
				h.GetUser().GetLogin() != "outsider" || f.GetUser().GetLogin() != "outsider" {
				t.Fatalf("fork head %v, user %v", h, f.GetUser())
			}

			// The default state is open; all and closed; the head filter.
			for _, tc := range []struct {
				opts github.PullRequestListOptions
				want []int
			}{
				{github.PullRequestListOptions{}, []int{10, 9, 7}},
				{github.PullRequestListOptions{State: "all", Direction: "asc"}, []int{7, 8, 9, 10}},
				{github.PullRequestListOptions{State: "closed"}, []int{8}},
				{github.PullRequestListOptions{Head: "outsider:main"}, []int{10}},
				{github.PullRequestListOptions{Head: o.Owner + ":main"}, nil},
				{github.PullRequestListOptions{Base: "nowhere"}, nil},
			} {
				prs, _, err := c.PullRequests.List(ctx, o.Owner, o.Repo, &tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				var got []int
				for _, p := range prs {
					got = append(got, p.GetNumber())
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("%+v: %v, want %v", tc.opts, got, tc.want)
				}
			}

			// Pages of one, with GitHub's Link header.
			var seen []int
			opts := &github.PullRequestListOptions{State: "all", ListOptions: github.ListOptions{PerPage: 1}}
			for {
				prs, resp, err := c.PullRequests.List(ctx, o.Owner, o.Repo, opts)
				if err != nil {
					t.Fatal(err)
				}
				if len(prs) != 1 {
					t.Fatalf("page %d: %d pulls", opts.Page, len(prs))
				}
				seen = append(seen, prs[0].GetNumber())
				if opts.Page <= 1 && (resp.LastPage != 4 || !strings.Contains(resp.Header.Get("Link"), `rel="next"`)) {
					t.Fatalf("first page: last %d, Link %q", resp.LastPage, resp.Header.Get("Link"))
				}
				if resp.NextPage == 0 {
					break
				}
				opts.Page = resp.NextPage
			}
			if fmt.Sprint(seen) != "[10 9 8 7]" {
				t.Fatalf("pages %v", seen)
			}

			// One pull request, replaced by the test; 404 when unknown.
			srv.SetPull(githubtest.Pull{Number: 7, Title: "Add the cache, v2", HeadRef: "cache", HeadSHA: shaB, Merged: true})
			got, _, err := c.PullRequests.Get(ctx, o.Owner, o.Repo, 7)
			if err != nil {
				t.Fatal(err)
			}
			if got.GetTitle() != "Add the cache, v2" || got.GetHead().GetSHA() != shaB || got.GetState() != "closed" ||
				!got.GetMerged() || got.MergedAt == nil || got.ClosedAt == nil || got.GetComments() != 0 ||
				got.GetBase().GetRef() != githubtest.DefaultBaseRef {
				t.Fatalf("pull %v", got)
			}
			_, _, err = c.PullRequests.Get(ctx, o.Owner, o.Repo, 404)
			errorResponse(t, err, http.StatusNotFound)
			_, _, err = c.PullRequests.Get(ctx, o.Owner, "elsewhere", 7)
			errorResponse(t, err, http.StatusNotFound)

			// Sorted by update: 7 was updated last.
			prs, _, err = c.PullRequests.List(ctx, o.Owner, o.Repo, &github.PullRequestListOptions{State: "all", Sort: "updated", Direction: "desc"})
			if err != nil {
				t.Fatal(err)
			}
			if len(prs) != 4 || prs[0].GetNumber() != 7 {
				t.Fatalf("by update: %v", prs)
			}

			_, _, err = c.PullRequests.List(ctx, o.Owner, o.Repo, &github.PullRequestListOptions{State: "merged"})
			if er := errorResponse(t, err, http.StatusUnprocessableEntity); len(er.Errors) != 1 || er.Errors[0].Field != "state" {
				t.Fatalf("errors %+v", er.Errors)
			}
		})
	}
}

func TestSetPullDefaultsAndPanics(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{})
	o := srv.Options()
	c := client(t, srv, o.Token, false)
	srv.SetPull(githubtest.Pull{Number: 3})
	p, _, err := c.PullRequests.Get(context.Background(), o.Owner, o.Repo, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p.GetState() != "open" || p.GetHead().GetRef() != "pr-3" || len(p.GetHead().GetSHA()) != 40 ||
		p.GetBase().GetRef() != "main" || p.GetUser().GetLogin() != "octocat" || p.GetMerged() {
		t.Fatalf("pull %v", p)
	}
	for _, bad := range []githubtest.Pull{{Number: 0}, {Number: 1, State: "merged"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SetPull(%+v) did not panic", bad)
				}
			}()
			srv.SetPull(bad)
		}()
	}
}

func TestCommitStatuses(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{})
	o := srv.Options()
	c := client(t, srv, o.Token, true)
	ctx := context.Background()
	srv.SetPull(githubtest.Pull{Number: 1, HeadRef: "feature/x", HeadSHA: shaA})

	created, resp, err := c.Repositories.CreateStatus(ctx, o.Owner, o.Repo, shaA, &github.RepoStatus{
		State: github.String("pending"), Context: github.String("no8s/preview"), Description: github.String("Planning"),
		TargetURL: github.String("https://ci.example/1")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d, want 201", resp.StatusCode)
	}
	if created.GetID() == 0 || created.GetState() != "pending" || created.GetContext() != "no8s/preview" ||
		created.GetDescription() != "Planning" || created.GetTargetURL() != "https://ci.example/1" ||
		created.GetCreator().GetLogin() != "no8s-bot" || created.CreatedAt == nil || created.UpdatedAt == nil ||
		created.GetURL() != srv.EnterpriseURL()+"repos/"+o.Owner+"/"+o.Repo+"/statuses/"+shaA {
		t.Fatalf("status %v", created)
	}
	// A description of exactly 140 characters, not bytes, is fine.
	desc140 := strings.Repeat("é", githubtest.MaxStatusDescription)
	if _, _, err := c.Repositories.CreateStatus(ctx, o.Owner, o.Repo, shaA, &github.RepoStatus{
		State: github.String("success"), Context: github.String("no8s/preview"), Description: github.String(desc140)}); err != nil {
		t.Fatal(err)
	}
	// No context is "default".
	if _, _, err := c.Repositories.CreateStatus(ctx, o.Owner, o.Repo, shaB, &github.RepoStatus{State: github.String("error")}); err != nil {
		t.Fatal(err)
	}

	// Refused: too long a description, an unknown state, no state, a
	// branch name instead of a commit.
	_, _, err = c.Repositories.CreateStatus(ctx, o.Owner, o.Repo, shaA, &github.RepoStatus{
		State: github.String("success"), Description: github.String(desc140 + "!")})
	er := errorResponse(t, err, http.StatusUnprocessableEntity)
	if er.Message != "Validation Failed" || len(er.Errors) != 1 || er.Errors[0].Field != "description" || er.Errors[0].Resource != "Status" ||
		er.Errors[0].Message != "description is too long (maximum is 140 characters)" || !strings.Contains(er.DocumentationURL, "create-a-commit-status") {
		t.Fatalf("error %+v", er)
	}
	_, _, err = c.Repositories.CreateStatus(ctx, o.Owner, o.Repo, shaA, &github.RepoStatus{State: github.String("cancelled")})
	if er := errorResponse(t, err, http.StatusUnprocessableEntity); len(er.Errors) != 1 || er.Errors[0].Field != "state" {
		t.Fatalf("error %+v", er)
	}
	_, _, err = c.Repositories.CreateStatus(ctx, o.Owner, o.Repo, shaA, &github.RepoStatus{Description: github.String("x")})
	errorResponse(t, err, http.StatusUnprocessableEntity)
	_, _, err = c.Repositories.CreateStatus(ctx, o.Owner, o.Repo, "feature/x", &github.RepoStatus{State: github.String("success")})
	if er := errorResponse(t, err, http.StatusUnprocessableEntity); er.Message != "No commit found for SHA: feature/x" {
		t.Fatalf("error %+v", er)
	}

	// Newest first from the API, oldest first from the inspection; the
	// pull request's head branch stands for its head commit.
	for _, ref := range []string{shaA, strings.ToUpper(shaA), "feature/x"} {
		list, _, err := c.Repositories.ListStatuses(ctx, o.Owner, o.Repo, ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].GetState() != "success" || list[1].GetState() != "pending" || list[1].GetID() != created.GetID() {
			t.Fatalf("%s: statuses %v", ref, list)
		}
	}
	page, resp, err := c.Repositories.ListStatuses(ctx, o.Owner, o.Repo, shaA, &github.ListOptions{PerPage: 1, Page: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].GetState() != "pending" || resp.PrevPage != 1 || resp.NextPage != 0 {
		t.Fatalf("page 2: %v, prev %d next %d", page, resp.PrevPage, resp.NextPage)
	}
	if got := srv.Statuses(shaA); len(got) != 2 ||
		got[0] != (githubtest.Status{State: "pending", Description: "Planning", TargetURL: "https://ci.example/1", Context: "no8s/preview"}) ||
		got[1] != (githubtest.Status{State: "success", Description: desc140, Context: "no8s/preview"}) {
		t.Fatalf("inspected %+v", got)
	}
	if got := srv.Statuses(shaB); len(got) != 1 || got[0].Context != "default" || got[0].State != "error" {
		t.Fatalf("inspected %+v", got)
	}
	none, _, err := c.Repositories.ListStatuses(ctx, o.Owner, o.Repo, "3333333333333333333333333333333333333333", nil)
	if err != nil || len(none) != 0 {
		t.Fatalf("unknown commit: %v, %v", none, err)
	}
}

func TestComments(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{})
	o := srv.Options()
	c := client(t, srv, o.Token, false)
	ctx := context.Background()
	srv.SetPull(githubtest.Pull{Number: 5, HeadRef: "preview"})

	otherID, ok := srv.AddComment(5, "reviewer", "<!-- no8s-preview -->\nlooks like yours, is not")
	if !ok {
		t.Fatal("AddComment on a known pull request")
	}
	if _, ok := srv.AddComment(6, "reviewer", "x"); ok {
		t.Fatal("AddComment on an unknown pull request")
	}
	mine, resp, err := c.Issues.CreateComment(ctx, o.Owner, o.Repo, 5, &github.IssueComment{Body: github.String("<!-- no8s-preview -->\nplan: 1 to add")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d, want 201", resp.StatusCode)
	}
	if mine.GetID() == 0 || mine.GetID() == otherID || mine.GetUser().GetLogin() != "no8s-bot" ||
		mine.GetHTMLURL() != fmt.Sprintf("https://github.com/%s/%s/pull/5#issuecomment-%d", o.Owner, o.Repo, mine.GetID()) ||
		mine.CreatedAt == nil || mine.UpdatedAt == nil || !strings.HasSuffix(mine.GetIssueURL(), "/issues/5") {
		t.Fatalf("comment %v", mine)
	}
	for i := range 3 {
		srv.AddComment(5, "reviewer", fmt.Sprintf("comment %d", i))
	}

	// Look for its own marked comment, a page of two at a time, skipping
	// the other user's.
	var found *github.IssueComment
	var all []int64
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 2}}
	for {
		cs, resp, err := c.Issues.ListComments(ctx, o.Owner, o.Repo, 5, opts)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("Link") == "" {
			t.Fatalf("page %d without a Link header", opts.Page)
		}
		for _, cm := range cs {
			all = append(all, cm.GetID())
			if cm.GetUser().GetLogin() == "no8s-bot" && strings.HasPrefix(cm.GetBody(), "<!-- no8s-preview -->") && found == nil {
				found = cm
			}
		}
		if resp.NextPage == 0 {
			if resp.PrevPage != 2 {
				t.Fatalf("last page: prev %d", resp.PrevPage)
			}
			break
		}
		opts.Page = resp.NextPage
	}
	if len(all) != 5 || all[0] != otherID || all[1] != mine.GetID() || found == nil || found.GetID() != mine.GetID() {
		t.Fatalf("comments %v, found %v", all, found)
	}

	edited, resp, err := c.Issues.EditComment(ctx, o.Owner, o.Repo, found.GetID(), &github.IssueComment{Body: github.String("<!-- no8s-preview -->\nplan: 2 to add")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || edited.GetID() != mine.GetID() || edited.GetBody() != "<!-- no8s-preview -->\nplan: 2 to add" {
		t.Fatalf("status %d, comment %v", resp.StatusCode, edited)
	}
	got := srv.Comments(5)
	if len(got) != 5 || got[0] != (githubtest.Comment{ID: otherID, User: "reviewer", Body: "<!-- no8s-preview -->\nlooks like yours, is not"}) ||
		got[1] != (githubtest.Comment{ID: mine.GetID(), User: "no8s-bot", Body: "<!-- no8s-preview -->\nplan: 2 to add", Edits: 1}) {
		t.Fatalf("inspected %+v", got)
	}
	if srv.Comments(6) != nil {
		t.Fatal("comments of an unknown pull request")
	}

	// GitHub's limit is 65536 characters, not bytes.
	longest := strings.Repeat("ü", githubtest.MaxCommentBody)
	if _, _, err := c.Issues.EditComment(ctx, o.Owner, o.Repo, mine.GetID(), &github.IssueComment{Body: github.String(longest)}); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"create": func() error {
			_, _, err := c.Issues.CreateComment(ctx, o.Owner, o.Repo, 5, &github.IssueComment{Body: github.String(longest + "!")})
			return err
		},
		"edit": func() error {
			_, _, err := c.Issues.EditComment(ctx, o.Owner, o.Repo, mine.GetID(), &github.IssueComment{Body: github.String(longest + "!")})
			return err
		},
	} {
		er := errorResponse(t, call(), http.StatusUnprocessableEntity)
		if er.Message != "Validation Failed" || len(er.Errors) != 1 || er.Errors[0].Resource != "IssueComment" ||
			er.Errors[0].Message != "Body is too long (maximum is 65536 characters)" {
			t.Fatalf("%s: %+v", name, er)
		}
	}
	_, _, err = c.Issues.CreateComment(ctx, o.Owner, o.Repo, 5, &github.IssueComment{})
	errorResponse(t, err, http.StatusUnprocessableEntity)
	_, _, err = c.Issues.CreateComment(ctx, o.Owner, o.Repo, 5, &github.IssueComment{Body: github.String("  ")})
	errorResponse(t, err, http.StatusUnprocessableEntity)
	if got := srv.Comments(5); len(got) != 5 || got[1].Edits != 2 || len([]rune(got[1].Body)) != githubtest.MaxCommentBody {
		t.Fatalf("after refusals: %d comments, edits %d", len(got), got[1].Edits)
	}

	// 404s: unknown pull request, unknown comment.
	_, _, err = c.Issues.ListComments(ctx, o.Owner, o.Repo, 6, nil)
	errorResponse(t, err, http.StatusNotFound)
	_, _, err = c.Issues.CreateComment(ctx, o.Owner, o.Repo, 6, &github.IssueComment{Body: github.String("hi")})
	errorResponse(t, err, http.StatusNotFound)
	_, _, err = c.Issues.EditComment(ctx, o.Owner, o.Repo, 42, &github.IssueComment{Body: github.String("hi")})
	errorResponse(t, err, http.StatusNotFound)

	// One comment, read back.
	one, _, err := c.Issues.GetComment(ctx, o.Owner, o.Repo, otherID)
	if err != nil || one.GetUser().GetLogin() != "reviewer" || one.GetAuthorAssociation() != "NONE" {
		t.Fatalf("comment %v, %v", one, err)
	}
}

func TestCommentsSince(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	srv := githubtest.New(t, githubtest.Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	o := srv.Options()
	c := client(t, srv, o.Token, false)
	srv.SetPull(githubtest.Pull{Number: 1})
	srv.AddComment(1, "a", "early")
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	srv.AddComment(1, "b", "late")
	since := now.Add(-time.Minute)
	cs, _, err := c.Issues.ListComments(context.Background(), o.Owner, o.Repo, 1, &github.IssueListCommentsOptions{Since: &since})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].GetBody() != "late" || !cs[0].GetCreatedAt().Time.Equal(now) {
		t.Fatalf("comments %v", cs)
	}
	p, _, err := c.PullRequests.Get(context.Background(), o.Owner, o.Repo, 1)
	if err != nil || !p.GetUpdatedAt().Time.Equal(now) || p.GetComments() != 2 {
		t.Fatalf("a comment updates its pull request: %v, %v", p, err)
	}
}

func TestPullEndpointsAuthFaultsAndRecording(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{})
	o := srv.Options()
	ctx := context.Background()
	srv.SetPull(githubtest.Pull{Number: 2, HeadSHA: shaA})

	bad := client(t, srv, "ghp_wrong", false)
	_, _, err := bad.PullRequests.List(ctx, o.Owner, o.Repo, nil)
	if er := errorResponse(t, err, http.StatusUnauthorized); er.Message != "Bad credentials" {
		t.Fatalf("error %+v", er)
	}
	_, _, err = bad.Issues.CreateComment(ctx, o.Owner, o.Repo, 2, &github.IssueComment{Body: github.String("x")})
	errorResponse(t, err, http.StatusUnauthorized)

	c := client(t, srv, o.Token, true)
	srv.FailNext(githubtest.Match{Method: "POST", PathSuffix: "/comments"}, 1, githubtest.SecondaryRateLimit(3*time.Second))
	srv.FailNext(githubtest.Match{PathSuffix: "/statuses/" + shaA}, 1, githubtest.BadGateway())
	srv.FailNext(githubtest.Match{Method: "PATCH"}, 1, githubtest.BadCredentials())

	_, _, err = c.Issues.CreateComment(ctx, o.Owner, o.Repo, 2, &github.IssueComment{Body: github.String("first")})
	var abuse *github.AbuseRateLimitError
	if !errors.As(err, &abuse) || abuse.RetryAfter == nil || *abuse.RetryAfter != 3*time.Second {
		t.Fatalf("error %v (%T), want a secondary rate limit", err, err)
	}
	if len(srv.Comments(2)) != 0 {
		t.Fatal("a faulted request created a comment")
	}
	// go-github now refuses to ask until Retry-After passed: a new client.
	c = client(t, srv, o.Token, true)
	cm, _, err := c.Issues.CreateComment(ctx, o.Owner, o.Repo, 2, &github.IssueComment{Body: github.String("second")})
	if err != nil {
		t.Fatal(err)
	}

	_, _, err = c.Repositories.CreateStatus(ctx, o.Owner, o.Repo, shaA, &github.RepoStatus{State: github.String("pending")})
	errorResponse(t, err, http.StatusBadGateway)
	if len(srv.Statuses(shaA)) != 0 {
		t.Fatal("a faulted request created a status")
	}
	if _, _, err := c.Repositories.CreateStatus(ctx, o.Owner, o.Repo, shaA, &github.RepoStatus{State: github.String("pending")}); err != nil {
		t.Fatal(err)
	}

	_, _, err = c.Issues.EditComment(ctx, o.Owner, o.Repo, cm.GetID(), &github.IssueComment{Body: github.String("third")})
	errorResponse(t, err, http.StatusUnauthorized)
	if got := srv.Comments(2); got[0].Edits != 0 || got[0].Body != "second" {
		t.Fatalf("a faulted edit changed the comment: %+v", got)
	}

	var paths []string
	for _, r := range srv.Requests() {
		paths = append(paths, fmt.Sprintf("%s %s %d", r.Method, r.Path, r.Status))
	}
	want := []string{
		"GET /repos/no8s/infra/pulls 401",
		"POST /repos/no8s/infra/issues/2/comments 401",
		"POST /api/v3/repos/no8s/infra/issues/2/comments 403",
		"POST /api/v3/repos/no8s/infra/issues/2/comments 201",
		"POST /api/v3/repos/no8s/infra/statuses/" + shaA + " 502",
		"POST /api/v3/repos/no8s/infra/statuses/" + shaA + " 201",
		fmt.Sprintf("PATCH /api/v3/repos/no8s/infra/issues/comments/%d 401", cm.GetID()),
	}
	if strings.Join(paths, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests\n%s\nwant\n%s", strings.Join(paths, "\n"), strings.Join(want, "\n"))
	}
	if r := srv.Requests()[3]; r.Authorization != "Bearer "+o.Token || r.Body != `{"body":"second"}`+"\n" {
		t.Fatalf("recorded %+v", r)
	}
}

func TestConcurrentPreviewClients(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{})
	o := srv.Options()
	c := client(t, srv, o.Token, false)
	ctx := context.Background()
	const pulls, rounds = 4, 5
	for n := 1; n <= pulls; n++ {
		srv.SetPull(githubtest.Pull{Number: n})
	}
	var wg sync.WaitGroup
	errs := make(chan error, pulls*3)
	for n := 1; n <= pulls; n++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			cm, _, err := c.Issues.CreateComment(ctx, o.Owner, o.Repo, n, &github.IssueComment{Body: github.String("round 0")})
			if err != nil {
				errs <- err
				return
			}
			for i := 1; i < rounds; i++ {
				if _, _, err := c.Issues.EditComment(ctx, o.Owner, o.Repo, cm.GetID(), &github.IssueComment{Body: github.String(fmt.Sprintf("round %d", i))}); err != nil {
					errs <- err
					return
				}
				p, _, err := c.PullRequests.Get(ctx, o.Owner, o.Repo, n)
				if err != nil {
					errs <- err
					return
				}
				if _, _, err := c.Repositories.CreateStatus(ctx, o.Owner, o.Repo, p.GetHead().GetSHA(), &github.RepoStatus{State: github.String("pending")}); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range rounds {
				srv.AddComment(n, "reviewer", "noise")
				_ = srv.Comments(n)
				srv.SetPull(githubtest.Pull{Number: n, Title: "busy"})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for n := 1; n <= pulls; n++ {
		cs := srv.Comments(n)
		mine := 0
		for _, cm := range cs {
			if cm.User == "no8s-bot" {
				mine++
				if cm.Edits != rounds-1 || cm.Body != fmt.Sprintf("round %d", rounds-1) {
					t.Fatalf("pull %d: %+v", n, cm)
				}
			}
		}
		if len(cs) != rounds+1 || mine != 1 {
			t.Fatalf("pull %d: %+v", n, cs)
		}
		p, _, err := c.PullRequests.Get(ctx, o.Owner, o.Repo, n)
		if err != nil {
			t.Fatal(err)
		}
		if got := srv.Statuses(p.GetHead().GetSHA()); len(got) != rounds-1 {
			t.Fatalf("pull %d: %d statuses", n, len(got))
		}
	}
}

func TestPullEndpointsBadBodies(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{})
	o := srv.Options()
	srv.SetPull(githubtest.Pull{Number: 1})
	for _, tc := range []struct {
		method, path, body string
		status             int
		message            string
	}{
		{"POST", "statuses/" + shaA, `not json`, http.StatusBadRequest, "Problems parsing JSON"},
		{"POST", "statuses/" + shaA, `["pending"]`, http.StatusBadRequest, "Problems parsing JSON"},
		{"POST", "statuses/" + shaA, `{"state":5}`, http.StatusUnprocessableEntity, "Invalid request.\n\nFor 'properties/state', 5 is not a string."},
		{"POST", "issues/1/comments", `{"body":true}`, http.StatusUnprocessableEntity, "Invalid request.\n\nFor 'properties/body', true is not a string."},
		{"POST", "issues/1/comments", `{}`, http.StatusUnprocessableEntity, "Invalid request.\n\n\"body\" wasn't supplied."},
		{"DELETE", "issues/1/comments", ``, http.StatusNotFound, "Not Found"},
		{"GET", "issues/x/comments", ``, http.StatusNotFound, "Not Found"},
		{"GET", "pulls/0", ``, http.StatusNotFound, "Not Found"},
		{"GET", "issues/comments/1", ``, http.StatusNotFound, "Not Found"},
	} {
		req, err := http.NewRequest(tc.method, srv.EnterpriseURL()+"repos/"+o.Owner+"/"+o.Repo+"/"+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "token "+o.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		err = github.CheckResponse(resp)
		resp.Body.Close()
		if er := errorResponse(t, err, tc.status); er.Message != tc.message {
			t.Fatalf("%s %s %s: message %q, want %q", tc.method, tc.path, tc.body, er.Message, tc.message)
		}
		if resp.Header.Get("X-RateLimit-Limit") == "" {
			t.Fatalf("%s %s: no rate limit headers", tc.method, tc.path)
		}
	}
}
