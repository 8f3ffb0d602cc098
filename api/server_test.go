package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	gosync "sync"
	"testing"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/sync"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	writeToken = "w-9f3c1d7e2a4b"
	readToken  = "r-5e8a2c6b1f0d"
)

// env is a server on a fresh database, with a Git-owned type and resource.
type env struct {
	t      *testing.T
	url    string
	store  *postgres.Store
	syncer *sync.Syncer
	srv    *api.Server
	http   *httptest.Server
	runner *fakeRunner
	logs   *lockedBuffer
	gitRes *store.Resource
}

// fakeRunner records triggers; the agent's sync runner is tested on its own.
type fakeRunner struct {
	mu        gosync.Mutex
	known     map[string]bool
	triggered []string
}

func (f *fakeRunner) Trigger(name string, force bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.known[name] {
		return false
	}
	f.triggered = append(f.triggered, name)
	return true
}

func (f *fakeRunner) Sources() []string {
	var out []string
	for name := range f.known {
		out = append(out, name)
	}
	return out
}

func (f *fakeRunner) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.triggered...)
}

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu gosync.Mutex
	bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

const gitTypes = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Network}
spec:
  group: infra.example.com
  versions:
    - name: v1
      schema:
        type: object
        required: [cidr]
        properties:
          cidr: {type: string}
`

const gitResources = `apiVersion: infra.example.com/v1
kind: Network
metadata: {name: prod-vpc}
spec: {cidr: 10.0.0.0/16}
`

func newEnv(t *testing.T, mutate func(*api.Options)) *env {
	t.Helper()
	ctx := t.Context()
	url := pgtest.URL(t)
	st, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	syncer := sync.New(st, nil)
	snap := &source.Snapshot{Revision: manifest.Revision("main@sha1:" + strings.Repeat("ab", 20)), Files: []manifest.File{
		file("net/network.yaml", gitResources), file("types/network.yaml", gitTypes)}}
	if _, err := syncer.Sync(ctx, sync.Target{Name: "infra", Kind: store.SourceGit, URL: "https://git.example.com/infra.git"}, snap, false); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	runner := &fakeRunner{known: map[string]bool{"infra": true}}
	opts := api.Options{Store: st, Syncer: syncer, Sources: runner, WriteToken: writeToken,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if mutate != nil {
		mutate(&opts)
	}
	srv, hs := serve(t, opts)
	e := &env{t: t, url: url, store: st, syncer: syncer, srv: srv, http: hs, runner: runner, logs: logs}
	e.gitRes, err = st.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Network", Namespace: "default", Name: "prod-vpc"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// serve starts a server and its event hub until the test ends.
func serve(t testing.TB, opts api.Options) (*api.Server, *httptest.Server) {
	t.Helper()
	srv := api.New(opts)
	hs := httptest.NewServer(srv.Handler())
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Run(runCtx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		hs.Close()
	})
	return srv, hs
}

func file(path, data string) manifest.File {
	sum := sha256.Sum256([]byte(data))
	return manifest.File{Path: path, Data: []byte(data), Hash: "sha256:" + hex.EncodeToString(sum[:])}
}

// call sends a request with the token (if any) and returns status and body.
func (e *env) call(method, path, token, body string) (int, []byte, http.Header) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.http.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	// Tests write to the store directly too: a read asks for a version
	// issued after whatever the test did, so the read model has it.
	if method == http.MethodGet && e.store != nil {
		// A store the test closed issues none: the read goes without.
		if v, err := e.store.Fence(e.t.Context()); err == nil {
			req.Header.Set(api.HeaderMinVersion, strconv.FormatInt(v, 10))
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, data, resp.Header
}

// must calls and fails unless the status is want; it decodes JSON into out.
func (e *env) must(method, path, token, body string, want int, out any) {
	e.t.Helper()
	status, data, _ := e.call(method, path, token, body)
	if status != want {
		e.t.Fatalf("%s %s = %d %s, want %d", method, path, status, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
}

const dbType = `{"name": "DatabaseCluster", "version": "v1", "description": "Managed database cluster",
  "schema": {"type": "object", "required": ["engine", "storage_gb"],
    "properties": {"engine": {"type": "string", "enum": ["postgres", "mysql"]},
      "storage_gb": {"type": "integer", "minimum": 10},
      "replicas": {"type": "integer", "default": 0},
      "pad": {"type": "string"}}}}`

const dbResource = `{"name": "production-pg", "resource_type_name": "DatabaseCluster", "resource_type_version": "v1",
  "action_plugin": "provision-db", "spec": {"engine": "postgres", "storage_gb": 500}}`

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

func itoa(id int64) string { return strconv.FormatInt(id, 10) }

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
