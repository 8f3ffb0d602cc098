package dashboard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// TestOrphanedSource shows a source no configuration lists any more: its
// phase and what to do about it.
func TestOrphanedSource(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := sync.New(f.st, nil).MarkOrphans(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	New(f.st, Options{}).ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET / = %d %s", rec.Code, body)
	}
	for _, want := range []string{`class="badge warn"`, "⌀", string(store.SourceOrphaned), "--mode forget"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("overview does not show %q for an orphaned source", want)
		}
	}
}
