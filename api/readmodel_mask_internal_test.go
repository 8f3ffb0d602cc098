package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/sqlite"
)

// TestPackedResourcesStayMasked stores resources whose specs carry a
// secret, the first of them the kind's dictionary, waits until the read
// model has packed them, and reads them by id, by name and in a page
// through the agent's masking: no answer carries the secret, and each is
// whole JSON.
func TestPackedResourcesStayMasked(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "no8s.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const secret = "hunter2-0a9f8e7d6c5b"
	if _, err := st.PutResourceType(ctx, &store.ResourceType{Name: "Db", Version: "v1", Group: "x.example.com",
		Schema: json.RawMessage(`{"type":"object"}`), Source: store.SourceRef{Name: store.APISource}}); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range 20 {
		r, err := st.CreateResource(ctx, &manifest.Resource{Group: "x.example.com", Version: "v1", Kind: "Db", Name: fmt.Sprintf("db-%02d", i),
			Spec: json.RawMessage(fmt.Sprintf(`{"password":%q,"n":%d}`, secret, i)), SpecHash: fmt.Sprintf("h%d", i)},
			store.SourceRef{Name: store.APISource})
		if err != nil {
			t.Fatal(err)
		}
		// Reconciled: a resource still due is packed only after a while.
		if _, err := st.SetResourceStatus(ctx, r.ID, store.StatusUpdate{Phase: manifest.PhaseReady, ObservedGeneration: r.Generation}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	srv := New(Options{Store: st, Logger: slog.New(slog.DiscardHandler), Wrap: redact.New(secret).HTTP})
	hs := httptest.NewServer(srv.Handler())
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done; hs.Close() })

	// Wait until every resource but the dictionary is packed.
	deadline := time.Now().Add(20 * time.Second)
	for {
		packed := 0
		srv.model.mu.RLock()
		for _, e := range srv.model.byID {
			if e.packed() {
				packed++
			}
		}
		srv.model.mu.RUnlock()
		if packed >= len(ids)-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d resources packed", packed, len(ids))
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	get := func(path string, out any) {
		t.Helper()
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %v %s", path, resp.StatusCode, err, body)
		}
		if strings.Contains(string(body), secret) {
			t.Errorf("GET %s carries the secret: %s", path, body)
		}
		if err := json.Unmarshal(body, out); err != nil {
			t.Errorf("GET %s: %v in %s", path, err, body)
		}
	}
	var one map[string]any
	for _, id := range ids {
		get(fmt.Sprintf("/api/v1/resources/%d", id), &one)
	}
	get("/api/v1/resources/by-name/Db/v1/db-07", &one)
	var page []map[string]any
	get("/api/v1/resources?kind=Db&limit=1000", &page)
	if len(page) != len(ids) {
		t.Errorf("the page has %d resources, not %d", len(page), len(ids))
	}
}
