package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // the driver "sqlite", as the agent's embedded store uses
)

// KubeconformVersion is the kubeconform release the benchmark builds.
const KubeconformVersion = "v0.8.0"

// BuildKubeconform installs the pinned kubeconform into dir and returns the
// binary's path. It is built from its own module, with the dependencies of
// its release.
func BuildKubeconform(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/yannh/kubeconform/cmd/kubeconform@"+KubeconformVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install kubeconform@%s: %w\n%s", KubeconformVersion, err, out)
	}
	return filepath.Join(dir, "kubeconform"), nil
}

var kubeconformSummary = regexp.MustCompile(`Valid: (\d+), Invalid: (\d+), Errors: (\d+)`)

// Kubeconform validates folder with the schemas in schemas and returns how
// long it took; every resource must be valid, and there must be want of
// them.
func Kubeconform(ctx context.Context, bin, schemas, folder string, want int) (Timing, error) {
	cmd := exec.CommandContext(ctx, bin, "-strict", "-summary", "-skip", "ResourceType",
		"-schema-location", filepath.Join(schemas, "{{ .ResourceKind }}.json"), folder)
	t, out, err := timeCommand(cmd)
	if err != nil {
		return t, fmt.Errorf("kubeconform: %w\n%s", err, tail(out))
	}
	m := kubeconformSummary.FindSubmatch(out)
	if m == nil {
		return t, fmt.Errorf("kubeconform printed no summary:\n%s", tail(out))
	}
	if valid, _ := strconv.Atoi(string(m[1])); valid != want || string(m[2]) != "0" || string(m[3]) != "0" {
		return t, fmt.Errorf("kubeconform: want %d valid, got %s", want, m[0])
	}
	return t, nil
}

// Validate runs `no8s-agent validate folder` and returns how long it took;
// it fails unless every manifest is valid.
func Validate(ctx context.Context, bin, folder string) (Timing, error) {
	t, out, err := timeCommand(exec.CommandContext(ctx, bin, "validate", folder))
	if err != nil {
		return t, fmt.Errorf("no8s-agent validate %s: %w\n%s", folder, err, tail(out))
	}
	return t, nil
}

// Timing is how long a command took, on the clock and in CPU (user and
// system): on a machine others share, the CPU time is the steadier one.
type Timing struct {
	Wall, CPU time.Duration
}

// timeCommand runs cmd and times it.
func timeCommand(cmd *exec.Cmd) (Timing, []byte, error) {
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t := Timing{Wall: time.Since(start)}
	if cmd.ProcessState != nil {
		t.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return t, out, err
}

// GitClone times `git clone --depth 1` of url into a new folder under dir,
// with or without a checkout.
func GitClone(ctx context.Context, url, dir string, checkout bool) (time.Duration, error) {
	into, err := os.MkdirTemp(dir, "clone-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(into)
	args := []string{"clone", "-q", "--depth", "1", "--branch", "main"}
	if !checkout {
		args = append(args, "--no-checkout")
	}
	cmd := exec.CommandContext(ctx, "git", append(args, url, into)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("git clone: %w\n%s", err, out)
	}
	return time.Since(start), nil
}

func tail(b []byte) []byte {
	if len(b) > 4096 {
		return b[len(b)-4096:]
	}
	return b
}

// noopArgs is River's no-op job.
type noopArgs struct{}

// Kind names the job kind.
func (noopArgs) Kind() string { return "noop" }

// River inserts n no-op jobs in bulk into a migrated River schema at
// dbURL, then runs a client with 8 workers on one queue and returns the
// time from its start until every job is completed. cooldown is the
// client's FetchCooldown, 0 for River's default (100 ms, which caps a
// client at MaxWorkers jobs per cooldown). Its pool is the size the
// agent's is with 8 workers.
func River(ctx context.Context, dbURL string, n int, cooldown, deadline time.Duration) (time.Duration, error) {
	pool, err := peerPool(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	return runRiver(ctx, riverpgxv5.New(pool), n, cooldown, deadline, func() (int, error) {
		var completed int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&completed)
		return completed, err
	})
}

// RiverSQLite is River on SQLite (its riversqlite driver, on the pure-Go
// modernc.org/sqlite, as the agent's embedded store) in a new database file
// at path: the peer of the agent's embedded store. One connection, as
// River's documentation advises for SQLite.
func RiverSQLite(ctx context.Context, path string, n int, cooldown, deadline time.Duration) (time.Duration, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	return runRiver(ctx, riversqlite.New(db), n, cooldown, deadline, func() (int, error) {
		var completed int
		err := db.QueryRowContext(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&completed)
		return completed, err
	})
}

// runRiver migrates River's schema through driver, inserts n no-op jobs,
// runs a client with 8 workers until every job completed and checks the
// count of completed jobs.
func runRiver[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], n int, cooldown, deadline time.Duration, completed func() (int, error)) (time.Duration, error) {
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return 0, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return 0, fmt.Errorf("river migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[noopArgs]) error { return nil }))
	client, err := river.NewClient(driver, &river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 8}},
		Workers:       workers,
		FetchCooldown: cooldown,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return 0, err
	}
	const batch = 10_000
	for lo := 0; lo < n; lo += batch {
		params := make([]river.InsertManyParams, min(batch, n-lo))
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return 0, fmt.Errorf("river insert: %w", err)
		}
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: n + 1, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancel()

	runCtx, stop := context.WithTimeout(ctx, deadline)
	defer stop()
	start := time.Now()
	if err := client.Start(runCtx); err != nil {
		return 0, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = client.Stop(stopCtx)
	}()
	for done := 0; done < n; {
		select {
		case <-runCtx.Done():
			return 0, fmt.Errorf("river: %d of %d jobs completed after %v", done, n, deadline)
		case ev := <-events:
			if ev.Kind == river.EventKindJobCompleted {
				done++
			}
		}
	}
	took := time.Since(start)
	got, err := completed()
	if err != nil {
		return 0, err
	}
	if got != n {
		return 0, fmt.Errorf("river: %d events of completed jobs, but %d completed in the table", n, got)
	}
	return took, nil
}

// StaticAnswer is the floor of an HTTP read on this machine: a plain
// net/http server that answers every GET with the same bytes the agent
// answered, and does nothing else. Under the same load generator, its
// figures are what any Go HTTP server could serve here, so the agent's
// read figures are read beside them.
type StaticAnswer struct {
	srv *httptest.Server
}

// ServeStatic starts a StaticAnswer of body with contentType on loopback.
func ServeStatic(body []byte, contentType string) *StaticAnswer {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
	return &StaticAnswer{srv: httptest.NewServer(h)}
}

// URL is the address every request to gets the answer.
func (s *StaticAnswer) URL() string { return s.srv.URL + "/" }

// Close stops the server.
func (s *StaticAnswer) Close() { s.srv.Close() }

// peerPool connects a peer to dbURL with a pool the size the agent's is
// with 8 workers.
func peerPool(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 8 + 6
	return pgxpool.NewWithConfig(ctx, cfg)
}
