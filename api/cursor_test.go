package api_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// TestContinueCursor walks a list with the X-Continue cursor while
// resources are created and removed between pages: every resource that
// exists throughout is listed exactly once, none removed before its page
// shows up, and the pages come in id order.
func TestContinueCursor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := t.Context()
	src := store.SourceRef{Name: "bulk", Revision: "r1"}
	apply := func(names ...string) map[string]int64 {
		rs := make([]*manifest.Resource, len(names))
		for i, n := range names {
			rs[i] = &manifest.Resource{Kind: "Queue", Group: "mq.example.com", Version: "v1", Name: n,
				Labels: map[string]string{"tier": "gold"}, Spec: json.RawMessage(`{}`), SpecHash: "sha256:" + n}
		}
		applied, err := e.store.ApplyResources(ctx, rs, src)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int64{}
		for i, a := range applied {
			ids[names[i]] = a.ID
		}
		return ids
	}
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("q-%02d", i))
	}
	ids := apply(names...)
	removed := map[string]bool{}
	seen := map[string]int{}
	path := "/api/v1/resources?source=bulk&label=tier=gold&limit=6"
	var lastID int64
	for page := 0; ; page++ {
		if page > 10 {
			t.Fatal("the pages do not end")
		}
		var rows []api.Resource
		status, body, hdr := e.call("GET", path, "", "")
		if status != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, status, body)
		}
		if err := json.Unmarshal(body, &rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.ID <= lastID {
				t.Errorf("page %d: id %d after %d", page, r.ID, lastID)
			}
			lastID = r.ID
			seen[r.Name]++
		}
		token := hdr.Get("X-Continue")
		if token == "" {
			break
		}
		// Opaque: not the id, nor anything short enough to be made up.
		if _, err := strconv.ParseInt(token, 10, 64); err == nil || len(token) < 16 {
			t.Errorf("cursor %q is not opaque", token)
		}
		if link := hdr.Get("Link"); !strings.Contains(link, "continue="+url.QueryEscape(token)) || strings.Contains(link, "after=") {
			t.Errorf("Link %q does not carry the cursor", link)
		}
		// Between pages: one resource not listed yet and one listed
		// already go, and two new ones come.
		for _, n := range names {
			if seen[n] == 0 && !removed[n] && ids[n] > lastID+3 {
				if err := e.store.DeleteResource(ctx, ids[n]); err != nil {
					t.Fatal(err)
				}
				removed[n] = true
				break
			}
		}
		for _, n := range names {
			if seen[n] == 1 && !removed[n] {
				if err := e.store.DeleteResource(ctx, ids[n]); err != nil {
					t.Fatal(err)
				}
				removed[n] = true
				break
			}
		}
		added := apply(fmt.Sprintf("new-%d-a", page), fmt.Sprintf("new-%d-b", page))
		for n, id := range added {
			names, ids[n] = append(names, n), id
		}
		path = "/api/v1/resources?source=bulk&label=tier=gold&limit=6&continue=" + url.QueryEscape(token)
	}
	for _, n := range names {
		switch {
		case seen[n] > 1:
			t.Errorf("%s listed %d times", n, seen[n])
		case seen[n] == 0 && !removed[n]:
			t.Errorf("%s, there throughout, never listed", n)
		}
	}
	if len(removed) < 4 {
		t.Errorf("only %d resources removed between pages: the test did not test", len(removed))
	}
}

// TestContinueCursorRefused checks that a cursor the agent did not issue,
// or one reused with other filters, is a 400 saying why, and that limits
// stay bounded.
func TestContinueCursorRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.must("POST", "/api/v1/resource-types", writeToken, dbType, 201, nil)
	for i := range 3 {
		e.must("POST", "/api/v1/resources", writeToken, fmt.Sprintf(
			`{"name": "pg-%d", "resource_type_name": "DatabaseCluster", "spec": {"engine": "postgres", "storage_gb": 10}}`, i), 201, nil)
	}
	_, _, hdr := e.call("GET", "/api/v1/resources?source=api&limit=1", "", "")
	token := hdr.Get("X-Continue")
	if token == "" {
		t.Fatalf("no X-Continue on a full page: %v", hdr)
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		t.Fatalf("cursor %q is not URL-safe base64: %v", token, err)
	}
	flipped := append([]byte(nil), raw...)
	flipped[8] ^= 1 // another id, with the check left as it was
	notIssued := "not a cursor this agent issued"
	tests := []struct {
		name, query string
		status      int
		contains    string
	}{
		{"as issued", "source=api&limit=1&continue=" + token, 200, `"name":"pg-1"`},
		{"another limit", "source=api&limit=5&continue=" + token, 200, `"name":"pg-2"`},
		{"garbled", "source=api&continue=" + token[:len(token)-3] + "xyz", 400, notIssued},
		{"cut", "source=api&continue=" + token[:10], 400, notIssued},
		{"not base64", "source=api&continue=%25%25%25", 400, notIssued},
		{"forged id", "source=api&continue=" + base64.RawURLEncoding.EncodeToString(flipped), 400, notIssued},
		{"a number", "source=api&continue=12", 400, notIssued},
		{"other filters", "source=infra&limit=1&continue=" + token, 400, "other filters"},
		{"without its filter", "limit=1&continue=" + token, 400, "other filters"},
		{"with after", "source=api&after=1&continue=" + token, 400, "continue and after"},
		{"limit still bounded", "source=api&limit=1001&continue=" + token, 400, "at most 1000"},
	}
	for _, tt := range tests {
		status, body, _ := e.call("GET", "/api/v1/resources?"+tt.query, "", "")
		if status != tt.status || !strings.Contains(string(body), tt.contains) {
			t.Errorf("%s: GET ?%s = %d %s, want %d with %q", tt.name, tt.query, status, body, tt.status, tt.contains)
		}
	}
}
