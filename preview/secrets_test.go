package preview_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/preview"
	"github.com/no8s/no8s-agent/redact"
)

// leakySecret has the characters the comment's escapers change, and is
// long enough that a table cell cuts its JSON form.
const leakySecret = `pa"ss&w<o>rd|1f-and-a-longer-tail-0c9e`

// leakyPlanner answers a plan that echoes the secret in its summary and
// its output, as a careless script does.
type leakyPlanner struct{ planner }

func (leakyPlanner) Plan(context.Context, *action.Request) (*action.Plan, error) {
	return &action.Plan{Changes: true, Summary: "deploy with " + leakySecret, Output: "~ password: " + leakySecret}, nil
}

type leakyActions struct{}

func (leakyActions) Get(name string) (action.Instance, bool) {
	return action.Instance{Name: name, Plugin: "test", Action: leakyPlanner{}}, name == "provision"
}

// TestSecretsMaskedBeforeEscaping previews a pull request whose action plan
// echoes a secret with a quote, '&', '<', '>' and '|' in its summary and
// output, and whose manifest quotes it in a spec field that changes: the
// comment holds the secret in none of the forms the comment's HTML and
// Markdown escaping give, nor a piece of it that a table cell cut.
func TestSecretsMaskedBeforeEscaping(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	m := redact.New(leakySecret)
	p := preview.New(preview.Options{Store: f.st, Syncer: f.syncer, Actions: leakyActions{}, Sources: []*preview.Source{f.src},
		Masker: m})
	quoted, _ := json.Marshal(leakySecret)
	sha := f.push(1, map[string]string{"dbs/a.yaml": fmt.Sprintf(
		"apiVersion: no8s.io/v1\nkind: Database\nmetadata: {name: a}\nspec: {storage_gb: 100, note: %s}\n", quoted)})
	if err := p.Preview(t.Context(), f.src, preview.Pull{Number: 1, HeadSHA: sha, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	body := f.only(1).Body
	for _, want := range []string{"<summary>Plan of Database/a by provision: deploy with ***</summary>", "~ password: ***", `+note: "***"`} {
		if !strings.Contains(body, want) {
			t.Errorf("comment lacks %q; the check would prove nothing:\n%s", want, body)
		}
	}
	js := string(quoted[1 : len(quoted)-1])
	cell := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;")
	for name, form := range map[string]string{
		"as is":                        leakySecret,
		"HTML":                         html.EscapeString(leakySecret),
		"HTML, quotes as they are":     strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(leakySecret),
		"Markdown cell":                cell.Replace(leakySecret),
		"JSON":                         js,
		"a piece of it, cut in a cell": leakySecret[:12],
		"a piece of its JSON, cut":     js[:12],
		"a piece of its escaped JSON":  cell.Replace(js)[:12],
		"a piece of it in HTML, cut":   html.EscapeString(leakySecret)[:12],
		"a piece of it, quotes as is":  strings.NewReplacer("&", "&amp;").Replace(leakySecret)[:12],
	} {
		if strings.Contains(body, form) {
			t.Errorf("the secret is in the comment %s: %q\n%s", name, form, body)
		}
	}
	if st := lastStatus(t, f.gh, sha); strings.Contains(st.Description, leakySecret[:8]) {
		t.Errorf("status description %q holds the secret", st.Description)
	}
}
