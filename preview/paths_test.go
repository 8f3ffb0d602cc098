package preview_test

import (
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/preview"
)

// TestCommentPathsFromRepositoryRoot previews a source whose manifests are
// in a folder of the repository: the comment names files as the pull
// request shows them, from the repository's root, in the table of changes
// and in the table of problems.
func TestCommentPathsFromRepositoryRoot(t *testing.T) {
	t.Parallel()
	f := newFixtureIn(t, 5, "deploy/prod")
	sha := f.push(1, map[string]string{"deploy/prod/dbs/a.yaml": db("a", 150), "deploy/prod/dbs/d.yaml": db("d", 50)})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 1, HeadSHA: sha, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	c := f.only(1)
	for _, want := range []string{"| create | Database/d | deploy/prod/dbs/d.yaml:1 | 1 |",
		"| update | Database/a | deploy/prod/dbs/a.yaml:1 | 2 |"} {
		if !strings.Contains(c.Body, want) {
			t.Errorf("comment lacks %q:\n%s", want, c.Body)
		}
	}
	bad := f.push(2, map[string]string{"deploy/prod/dbs/b.yaml": "apiVersion: no8s.io/v1\nkind: Database\nmetadata: {name: b}\nspec:\n  storage_gb: 5\n"})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 2, HeadSHA: bad}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	if c := f.only(2); !strings.Contains(c.Body, "| deploy/prod/dbs/b.yaml | 5 | spec.storage_gb: must be &gt;= 10") {
		t.Errorf("invalid: comment does not name the file from the repository's root:\n%s", c.Body)
	}
}
