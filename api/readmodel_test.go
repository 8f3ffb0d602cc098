package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/store/sqlite"
	"github.com/no8s/no8s-agent/sync"
)

// openBackend opens a migrated store of the named backend for t.
func openBackend(t *testing.T, backend string) store.Store {
	t.Helper()
	ctx := t.Context()
	var st interface {
		store.Store
		Migrate(context.Context) error
	}
	var err error
	switch backend {
	case "postgres":
		st, err = postgres.Open(ctx, pgtest.URL(t))
	case "sqlite":
		st, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "no8s.db"), sqlite.Options{})
	default:
		t.Fatalf("unknown backend %q", backend)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// syncNetworks syncs the Network type and prod-vpc as the git source infra.
func syncNetworks(t *testing.T, st store.Store) *sync.Syncer {
	t.Helper()
	syncer := sync.New(st, nil)
	snap := &source.Snapshot{Revision: manifest.Revision("main@sha1:" + strings.Repeat("ab", 20)), Files: []manifest.File{
		file("net/network.yaml", gitResources), file("types/network.yaml", gitTypes)}}
	if _, err := syncer.Sync(t.Context(), sync.Target{Name: "infra", Kind: store.SourceGit}, snap, false); err != nil {
		t.Fatal(err)
	}
	return syncer
}

// versionedCall sends a request with a minimum store version (none when
// zero) and returns the status, body and the store version the answer
// carries (zero when none).
func versionedCall(t *testing.T, base, method, path, body string, minVersion int64) (int, []byte, int64) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+writeToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if minVersion > 0 {
		req.Header.Set(api.HeaderMinVersion, strconv.FormatInt(minVersion, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v int64
	if h := resp.Header.Get(api.HeaderStoreVersion); h != "" {
		if v, err = strconv.ParseInt(h, 10, 64); err != nil {
			t.Fatalf("%s %s: %s %q", method, path, api.HeaderStoreVersion, h)
		}
	}
	return resp.StatusCode, data, v
}

// TestReadYourWrites writes through the API from several clients at once,
// while another writer keeps the store busy, and reads each write back at
// once with the store version its answer carried: every read sees its
// write, by id, by name and in a list, on both stores.
func TestReadYourWrites(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			st := openBackend(t, backend)
			syncer := syncNetworks(t, st)
			_, hs := serve(t, api.Options{Store: st, Syncer: syncer, Sources: &fakeRunner{known: map[string]bool{"infra": true}},
				WriteToken: writeToken})
			vpc, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Network", Namespace: "default", Name: "prod-vpc"})
			if err != nil {
				t.Fatal(err)
			}

			// Status writes straight to the store, which the read model
			// must read back all the while.
			churnCtx, stopChurn := context.WithCancel(t.Context())
			churned := make(chan error, 1)
			go func() {
				for i := 0; churnCtx.Err() == nil; i++ {
					if _, err := st.SetResourceStatus(churnCtx, vpc.ID, store.StatusUpdate{Phase: manifest.PhaseFailed,
						Message: fmt.Sprintf("churn %d", i)}); err != nil && churnCtx.Err() == nil {
						churned <- err
						return
					}
				}
				churned <- nil
			}()

			type result struct{ problems []string }
			var wg gosync.WaitGroup
			results := make([]result, 4)
			for w := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					fail := func(format string, args ...any) {
						results[w].problems = append(results[w].problems, fmt.Sprintf(format, args...))
					}
					for j := range 12 {
						name := fmt.Sprintf("w%d-%d", w, j)
						cidr := fmt.Sprintf("10.%d.%d.0/24", w, j)
						status, body, v := versionedCall(t, hs.URL, "POST", "/api/v1/resources", fmt.Sprintf(
							`{"name": %q, "resource_type_name": "Network", "spec": {"cidr": %q}}`, name, cidr), 0)
						if status != http.StatusCreated || v == 0 {
							fail("create %s = %d, version %d: %s", name, status, v, body)
							return
						}
						var created api.Resource
						if err := json.Unmarshal(body, &created); err != nil {
							fail("create %s: %v", name, err)
							return
						}
						status, body, _ = versionedCall(t, hs.URL, "GET", "/api/v1/resources/by-name/Network/v1/"+name, "", v)
						if status != http.StatusOK || !strings.Contains(string(body), cidr) {
							fail("read %s by name at version %d = %d %s", name, v, status, body)
						}
						moved := fmt.Sprintf("10.%d.%d.0/25", w, j)
						status, body, v2 := versionedCall(t, hs.URL, "PUT", "/api/v1/resources/"+strconv.FormatInt(created.ID, 10),
							fmt.Sprintf(`{"spec": {"cidr": %q}}`, moved), 0)
						if status != http.StatusOK || v2 <= v {
							fail("update %s = %d, version %d after %d: %s", name, status, v2, v, body)
							return
						}
						status, body, _ = versionedCall(t, hs.URL, "GET", "/api/v1/resources/"+strconv.FormatInt(created.ID, 10), "", v2)
						if status != http.StatusOK || !strings.Contains(string(body), moved) {
							fail("read %s by id at version %d = %d %s", name, v2, status, body)
						}
						status, body, _ = versionedCall(t, hs.URL, "GET", fmt.Sprintf("/api/v1/resources?kind=Network&limit=500&minVersion=%d", v2), "", 0)
						var page []api.Resource
						if status != http.StatusOK || json.Unmarshal(body, &page) != nil {
							fail("list at version %d = %d %s", v2, status, body)
							continue
						}
						found := false
						for _, r := range page {
							if r.ID == created.ID {
								found = strings.Contains(string(r.Spec), moved)
							}
						}
						if !found {
							fail("the list at version %d lacks %s with its new spec", v2, name)
						}
					}
				}()
			}
			wg.Wait()
			stopChurn()
			if err := <-churned; err != nil {
				t.Fatalf("churn: %v", err)
			}
			for w, r := range results {
				for _, p := range r.problems {
					t.Errorf("writer %d: %s", w, p)
				}
			}
		})
	}
}

// TestReadModelAfterLostNotifications cuts the read model's notification
// connection in the middle of a burst of writes, some of them made while
// it is cut, and checks that the model then answers every resource, source
// and type as the store has it, field for field.
func TestReadModelAfterLostNotifications(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())

	burst := func(round int) {
		t.Helper()
		src := store.SourceRef{Name: "burst", Path: "burst.yaml"}
		var rs []*manifest.Resource
		for i := range 200 {
			rs = append(rs, &manifest.Resource{Group: "infra.example.com", Version: "v1", Kind: "Network",
				Name: fmt.Sprintf("b%03d", i), Labels: map[string]string{"round": strconv.Itoa(round)},
				Spec: json.RawMessage(fmt.Sprintf(`{"cidr":"10.%d.%d.0/24"}`, round, i)), SpecHash: fmt.Sprintf("h%d-%d", round, i)})
		}
		applied, err := e.store.ApplyResources(ctx, rs, src)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range applied {
			if i%3 == 0 {
				if _, err := e.store.SetResourceStatus(ctx, a.ID, store.StatusUpdate{Phase: manifest.PhaseReady,
					Message: fmt.Sprintf("round %d", round), ObservedGeneration: a.Generation}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if round == 2 {
			// Some go, too.
			if err := e.store.DeleteResources(ctx, []int64{applied[5].ID, applied[6].ID}); err != nil {
				t.Fatal(err)
			}
		}
	}
	burst(0)
	e.must("GET", "/api/v1/resources?limit=1", "", "", http.StatusOK, nil)
	// Cut every listening connection (the read model's and the event
	// stream's) and write while they reconnect.
	var cut int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`).Scan(&cut); err != nil {
		t.Fatal(err)
	}
	if cut == 0 {
		t.Fatal("no listening connection to cut")
	}
	burst(1)
	burst(2)
	if _, err := e.store.PutSource(ctx, &store.Source{Name: "burst", Kind: store.SourceGit, Phase: store.SourceFailed, Message: "after the cut"}); err != nil {
		t.Fatal(err)
	}

	// What the store has, and what the API answers at a version after it.
	// Until the read model has listened again and been built afresh it
	// refuses reads (503 with Retry-After), and a client tries again.
	want, err := e.store.ListResources(ctx, store.ResourceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; {
		// Each read asks for a version issued after the writes (see call).
		status, body, h := e.call("GET", "/api/v1/resources?limit=1", "", "")
		if status == http.StatusOK {
			break
		}
		if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || time.Now().After(deadline) {
			t.Fatalf("GET = %d %s; want 200, or 503 with Retry-After for a while", status, body)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	var got []api.Resource
	for after := int64(0); ; {
		var page []api.Resource
		e.must("GET", fmt.Sprintf("/api/v1/resources?limit=100&after=%d", after), "", "", http.StatusOK, &page)
		got = append(got, page...)
		if len(page) < 100 {
			break
		}
		after = page[len(page)-1].ID
	}
	if len(got) != len(want) {
		t.Fatalf("the API lists %d resources, the store has %d", len(got), len(want))
	}
	for i, r := range want {
		if w, g := normalized(t, api.NewResource(r)), normalized(t, got[i]); !reflect.DeepEqual(w, g) {
			t.Errorf("resource %d: the API answers\n%v\nthe store has\n%v", r.ID, g, w)
		}
	}
	var sources []api.Source
	e.must("GET", "/api/v1/sources", "", "", http.StatusOK, &sources)
	wantSources, err := e.store.ListSources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sources) != len(wantSources) {
		t.Fatalf("the API lists %d sources, the store has %d", len(sources), len(wantSources))
	}
	for i, s := range wantSources {
		if w, g := normalized(t, api.NewSource(s)), normalized(t, sources[i]); !reflect.DeepEqual(w, g) {
			t.Errorf("source %s: the API answers %v, the store has %v", s.Name, g, w)
		}
	}
}

// normalized is v as JSON decodes it, for comparing what two encodings say.
func normalized(t *testing.T, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMinVersionBounds checks the edges of a read's store version: one
// not a number is a 400, and one the store never issued is answered 503
// with Retry-After once the wait runs out, not served as if current.
func TestMinVersionBounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *api.Options) { o.ReadWait = 300 * time.Millisecond })
	status, body, _ := versionedCall(t, e.http.URL, "GET", "/api/v1/resources?minVersion=soon", "", 0)
	if status != http.StatusBadRequest || !strings.Contains(string(body), "not a store version") {
		t.Errorf("minVersion=soon = %d %s, want 400", status, body)
	}
	start := time.Now()
	status, body, _ = versionedCall(t, e.http.URL, "GET", "/api/v1/resources/1", "", 1<<40)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "not yet") {
		t.Errorf("a version never issued = %d %s, want 503", status, body)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("answered after %s, before the wait ran out", d)
	}
	// Reads of the store itself take the parameter too.
	status, body, _ = versionedCall(t, e.http.URL, "GET", "/api/v1/agents?minVersion=1", "", 0)
	if status != http.StatusOK {
		t.Errorf("agents with minVersion = %d %s", status, body)
	}
}

// TestReadsSeeThisAgentsWrites creates and updates resources through the
// API and reads each back at once without a store version, as clients of
// the predecessor's API do: a read from the agent that took the write
// sees it.
func TestReadsSeeThisAgentsWrites(t *testing.T) {
	t.Parallel()
	st := openBackend(t, "postgres")
	syncer := syncNetworks(t, st)
	_, hs := serve(t, api.Options{Store: st, Syncer: syncer, Sources: &fakeRunner{known: map[string]bool{"infra": true}},
		WriteToken: writeToken})
	for i := range 40 {
		name := fmt.Sprintf("n%d", i)
		status, body, _ := versionedCall(t, hs.URL, "POST", "/api/v1/resources",
			fmt.Sprintf(`{"name": %q, "resource_type_name": "Network", "spec": {"cidr": "10.9.%d.0/24"}}`, name, i), 0)
		if status != http.StatusCreated {
			t.Fatalf("create %s = %d %s", name, status, body)
		}
		var created api.Resource
		if err := json.Unmarshal(body, &created); err != nil {
			t.Fatal(err)
		}
		status, body, _ = versionedCall(t, hs.URL, "GET", "/api/v1/resources/"+strconv.FormatInt(created.ID, 10), "", 0)
		if status != http.StatusOK || !strings.Contains(string(body), fmt.Sprintf("10.9.%d.0/24", i)) {
			t.Fatalf("read %s right after its creation = %d %s", name, status, body)
		}
		status, body, _ = versionedCall(t, hs.URL, "DELETE", "/api/v1/resources/"+strconv.FormatInt(created.ID, 10), "", 0)
		if status != http.StatusAccepted && status != http.StatusNoContent {
			t.Fatalf("delete %s = %d %s", name, status, body)
		}
		status, body, _ = versionedCall(t, hs.URL, "GET", "/api/v1/resources/"+strconv.FormatInt(created.ID, 10), "", 0)
		if status != http.StatusOK || !strings.Contains(string(body), `"deletion_requested_at":"`) {
			t.Fatalf("read %s right after its deletion was asked = %d %s", name, status, body)
		}
	}
}
