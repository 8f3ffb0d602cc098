package dashboard

import (
	"fmt"
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
	// Its resources read as orphaned too, in the list and on their page.
	rs, err := f.st.ListResources(t.Context(), store.ResourceFilter{})
	if err != nil || len(rs) == 0 {
		t.Fatalf("resources: %v, %v", rs, err)
	}
	rows := strings.Split(string(body), `<tr class="resource">`)[1:]
	if len(rows) != len(rs) {
		t.Fatalf("overview lists %d resources, want %d", len(rows), len(rs))
	}
	for _, row := range rows {
		if !strings.Contains(row, "⌀</span> orphaned") {
			t.Errorf("a resource of an orphaned source is not shown orphaned:\n%s", row)
		}
	}
	rec = httptest.NewRecorder()
	New(f.st, Options{}).ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("/resources/%d", rs[0].ID), nil))
	page, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusOK || !strings.Contains(string(page), "<dt>Orphaned</dt>") || !strings.Contains(string(page), "delete source") {
		t.Errorf("page of an orphaned source's resource = %d:\n%s", rec.Code, page)
	}
}
