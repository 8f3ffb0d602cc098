package client_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/client"
	"github.com/no8s/no8s-agent/manifest"
)

// TestFindResourceKindCase: kinds may differ only in case (DataBase and
// Database are two types). A reference spelt as one kind is that kind's
// resource, whichever the list holds first; one that matches several
// kinds only when case is ignored names none of them for sure and is
// refused, naming them.
func TestFindResourceKindCase(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/resources" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"id": 1, "kind": "DataBase", "name": "prod"}, {"id": 2, "kind": "Database", "name": "prod"},
			{"id": 3, "kind": "Database", "name": "db.example.org"}]`))
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		kind, name string
		id         int64
		err        string
	}{
		{"Database", "prod", 2, ""},
		{"DataBase", "prod", 1, ""},
		{"database", "db.example.org", 3, ""},
		{"database", "prod", 0, "DataBase/prod, Database/prod"},
		{"Database", "db", 0, "not found"},
	} {
		r, err := c.FindResource(t.Context(), manifest.ObjectRef{Kind: tt.kind, Name: tt.name})
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("FindResource(%s, %s) = %+v, %v; want an error naming %s", tt.kind, tt.name, r, err, tt.err)
		case tt.err == "" && (err != nil || r.ID != tt.id):
			t.Errorf("FindResource(%s, %s) = %+v, %v; want id %d", tt.kind, tt.name, r, err, tt.id)
		}
	}
}
