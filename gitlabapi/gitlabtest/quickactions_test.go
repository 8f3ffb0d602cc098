package gitlabtest_test

import (
	"strings"
	"testing"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
)

// Notes written through the API run their quick actions as GitLab's
// extractor finds them, on creation and on edit: a command at a line's
// start runs and leaves the note; one in a ``` block, an HTML block or a
// >>> quote does not, nor an indented one; a longer fence is no code block
// to the extractor, so a command after a ``` line inside it runs.
func TestQuickActions(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	mr := srv.AddMergeRequest(project, gitlabtest.MergeRequest{})
	tests := []struct {
		body, want, left string
	}{
		{"hi\n/label ~x\nbye", "/label ~x", "hi\nbye"},
		{"hi\n/MERGE", "/merge", "hi"},
		{"hi\n```\n/merge\n```", "", "hi\n```\n/merge\n```"},
		{"hi\n````\n```\n/approve\n````", "/approve", "hi\n````\n```\n````"},
		{"hi\n /merge\n\t/merge", "", "hi\n /merge\n\t/merge"},
		{"hi\n/merged\n/merge</summary>", "", "hi\n/merged\n/merge</summary>"},
		{"<!-- m -->\n/approve\n</details>", "", "<!-- m -->\n/approve\n</details>"},
		{">>>\n/approve\n>>>", "", ">>>\n/approve\n>>>"},
		{"a\r\n/unapprove\r\n", "/unapprove", "a"},
	}
	for _, tt := range tests {
		before := len(srv.QuickActions(project, mr.IID))
		n, _, err := c.Notes.CreateMergeRequestNote(project, mr.IID, &gitlab.CreateMergeRequestNoteOptions{Body: gitlab.Ptr(tt.body)})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(srv.QuickActions(project, mr.IID)[before:], ";"); got != tt.want || n.Body != tt.left {
			t.Errorf("%q ran %q and left %q, want %q and %q", tt.body, got, n.Body, tt.want, tt.left)
		}
	}
	if st := srv.UpdateMergeRequest(project, mr.IID, func(*gitlabtest.MergeRequest) {}).State; st != "merged" {
		t.Errorf("after /merge the merge request is %s", st)
	}
	n, _, err := c.Notes.CreateMergeRequestNote(project, mr.IID, &gitlab.CreateMergeRequestNoteOptions{Body: gitlab.Ptr("plain")})
	if err != nil {
		t.Fatal(err)
	}
	before := len(srv.QuickActions(project, mr.IID))
	if _, _, err := c.Notes.UpdateMergeRequestNote(project, mr.IID, n.ID, &gitlab.UpdateMergeRequestNoteOptions{Body: gitlab.Ptr("plain\n/close")}); err != nil {
		t.Fatal(err)
	}
	if got := srv.QuickActions(project, mr.IID)[before:]; len(got) != 1 || got[0] != "/close" {
		t.Errorf("an edit ran %q, want /close", got)
	}
}
