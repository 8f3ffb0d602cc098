package preview_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
	"github.com/no8s/no8s-agent/preview"
)

// echoPlanner plans as a tool that quotes the manifest does: its summary
// and output echo the spec's note, the output of a resource named big*
// many times over; a resource named err* fails to plan with the note in
// its error.
type echoPlanner struct{ planner }

func (echoPlanner) Plan(_ context.Context, r *action.Request) (*action.Plan, error) {
	var spec struct {
		Note string `json:"note"`
	}
	json.Unmarshal(r.Resource.Spec, &spec)
	switch {
	case strings.HasPrefix(r.Resource.Name, "err"):
		return nil, errors.New("cannot plan: " + spec.Note)
	case strings.HasPrefix(r.Resource.Name, "big"):
		return &action.Plan{Changes: true, Summary: spec.Note, Output: strings.Repeat(spec.Note+"\n", 200_000)}, nil
	}
	return &action.Plan{Changes: true, Summary: spec.Note, Output: "~ note = " + spec.Note}, nil
}

type echoActions struct{}

func (echoActions) Get(name string) (action.Instance, bool) {
	return action.Instance{Name: name, Plugin: "test", Action: echoPlanner{}}, name == "provision"
}

// noted is a Database manifest whose spec carries note.
func noted(name, note string) string {
	quoted, _ := json.Marshal(note)
	return fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Database\nmetadata: {name: %s}\nspec: {storage_gb: 100, note: %s}\n", name, quoted)
}

// commandLine is a line GitLab could take for a quick action, wherever it
// is: one that starts with a slash.
var commandLine = regexp.MustCompile(`(?m)^/`)

// TestGitLabNoQuickActionsFromData previews merge requests whose plans
// quote text the author wrote, with quick actions on lines of their own:
// after a ``` line (a code block to the Markdown renderer, not to GitLab's
// quick-action extractor), in a plan's summary, in a plan's error, and in
// an output so long that the note is cut inside its code block. GitLab runs
// none of them with the agent's token: the merge request is not merged,
// approved nor closed, and no line of the note starts with a slash.
func TestGitLabNoQuickActionsFromData(t *testing.T) {
	t.Parallel()
	f := newGitLabFixture(t, 5)
	f.p = preview.New(preview.Options{Store: f.st, Syncer: f.syncer, Actions: echoActions{}, Sources: []*preview.Source{f.src}})
	const attack = "x\n```\n/approve\n/merge\n/label ~ok\n"
	shas := map[int]string{
		1: f.push(1, map[string]string{"dbs/a.yaml": noted("a", attack)}),
		2: f.push(2, map[string]string{"dbs/err.yaml": noted("err", "boom\n/close\n")}),
		3: f.push(3, map[string]string{"dbs/big.yaml": noted("big", "/merge")}),
		4: f.push(4, map[string]string{"dbs/a.yaml": noted("a", "\n\n/approve\n/submit_review\n")}),
	}
	for iid, sha := range shas {
		if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: iid, HeadSHA: sha, BaseRef: "main"}); err != nil {
			t.Fatalf("Preview !%d: %v", iid, err)
		}
		// The edit of the note runs its quick actions too.
		sha2 := f.push(iid, map[string]string{"dbs/c.yaml": noted("c", attack)})
		if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: iid, HeadSHA: sha2, BaseRef: "main"}); err != nil {
			t.Fatalf("Preview !%d: %v", iid, err)
		}
		if got := f.gl.QuickActions(glProject, int64(iid)); len(got) > 0 {
			t.Errorf("!%d: the agent's note ran %q", iid, got)
		}
		if st := f.gl.UpdateMergeRequest(glProject, int64(iid), func(*gitlabtest.MergeRequest) {}).State; st != "opened" {
			t.Errorf("!%d is %s", iid, st)
		}
		n := f.mine(iid)
		if loc := commandLine.FindStringIndex(n.Body); loc != nil {
			t.Errorf("!%d: a line of the note starts with a slash: %q", iid, n.Body[loc[0]:min(len(n.Body), loc[0]+40)])
		}
		if iid == 1 && !strings.Contains(n.Body, "/approve") {
			t.Errorf("the plan's output is not in the note; the check proves nothing:\n%s", n.Body)
		}
	}
}

// mention is an @-mention GitLab (and GitHub) would notify: an @ after no
// word character, then a user or group name.
var mention = regexp.MustCompile(`(^|[^\w])@[A-Za-z0-9_]`)

// cells splits a Markdown table row into its cells as GFM does: a pipe
// ends a cell unless a backslash escapes it, and a backslash escapes the
// character after it, a backslash too.
func cells(row string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row):
			cur.WriteString(row[i : i+2])
			i++
		case row[i] == '|':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(row[i])
		}
	}
	return append(out, cur.String())
}

// TestGitLabNoteKeepsDataInItsPlace previews a merge request whose file
// names and plan text mention @all and a user, and whose file name has a
// backslash before a pipe: the note mentions nobody outside its code
// blocks, and every row of its tables has the table's cells, none added by
// the data.
func TestGitLabNoteKeepsDataInItsPlace(t *testing.T) {
	t.Parallel()
	f := newGitLabFixture(t, 5)
	f.p = preview.New(preview.Options{Store: f.st, Syncer: f.syncer, Actions: echoActions{}, Sources: []*preview.Source{f.src}})
	sha := f.push(1, map[string]string{
		"dbs/@all.yaml":          noted("e", "ping @all and @mallory"),
		`dbs/x\|@admins| y.yaml`: noted("f", "x"),
	})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 1, HeadSHA: sha, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	body := f.mine(1).Body
	for _, want := range []string{"Database/e", "Database/f", "ping", "all.yaml"} {
		if !strings.Contains(body, want) {
			t.Errorf("the note lacks %q; the check proves nothing:\n%s", want, body)
		}
	}
	// Mentions in code blocks notify no one.
	fence := ""
	for line := range strings.SplitSeq(body, "\n") {
		if t := strings.TrimSpace(line); fence == "" && strings.HasPrefix(t, "```") {
			fence = t
			continue
		} else if fence != "" {
			if t == fence {
				fence = ""
			}
			continue
		}
		if m := mention.FindString(line); m != "" {
			t.Errorf("the note mentions %q: %s", m, line)
		}
		if strings.HasPrefix(line, "| ") && len(cells(line)) != 7 {
			t.Errorf("a row of %d cells, want the table's 5: %s", len(cells(line))-2, line)
		}
	}
}
