// Package pgtest gives tests a real, empty PostgreSQL database each.
//
// When NO8S_TEST_DATABASE_URL is set (a postgres:// URL of a role allowed to
// create databases), the databases are created on that server. Otherwise the
// first call starts a throwaway server from the PostgreSQL binaries on the
// machine: initdb and postgres on PATH, or under /usr/lib/postgresql/*/bin
// (the highest version). It listens only on a Unix socket in a temporary
// directory, trades durability for speed, and runs as the postgres user when
// the tests run as root. Use Main in TestMain so the server is stopped and its
// directory removed when the tests finish; without it, the server still dies
// with the test binary but its directory stays behind.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL is the environment variable naming an existing server to use.
const EnvURL = "NO8S_TEST_DATABASE_URL"

// installHint tells people without PostgreSQL how to get it.
const installHint = "install the PostgreSQL server binaries (Debian/Ubuntu: apt-get install postgresql; " +
	"macOS: brew install postgresql) or set " + EnvURL + " to a postgres:// URL of a server where the role may create databases"

// startTimeout bounds initdb plus the server's start-up.
const startTimeout = 60 * time.Second

var (
	mu      sync.Mutex
	started bool
	srv     *server
	srvErr  error
)

// URL returns the connection URL of a new, empty database that exists for
// the duration of the test and is dropped in t.Cleanup. It fails the test,
// never skips it, when no server is available.
func URL(t testing.TB) string {
	t.Helper()
	base, err := baseURL()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return createDatabase(t, base)
}

// createDatabase creates a database for the test on the server base names
// and drops it when the test ends.
func createDatabase(t testing.TB, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("pgtest: %s must be a postgres:// URL", EnvURL)
	}
	name := dbName(t.Name())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect to the test server: %v%s", err, logTail())
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v%s", name, err, logTail())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("pgtest: connect to drop database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		// FORCE ends sessions a test left open, such as a leaked pool.
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// Main runs the tests of m and then stops the throwaway server, if one was
// started, and removes its directory. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// It does not return.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main for a TestMain that has more to do after the tests: it runs
// them, stops the throwaway server and returns the exit code.
func Run(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	s := srv
	mu.Unlock()
	if s != nil {
		if err := s.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// baseURL returns the URL of the maintenance database of the server to use,
// starting the throwaway server on first use.
func baseURL() (string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		srv, srvErr = start()
	}
	if srvErr != nil {
		return "", srvErr
	}
	return srv.url, nil
}

// logTail returns the end of the throwaway server's log, formatted to be
// appended to an error message, or "" when there is no such server.
func logTail() string {
	mu.Lock()
	s := srv
	mu.Unlock()
	if s == nil {
		return ""
	}
	return s.logTail()
}

var unsafeRE = regexp.MustCompile(`[^a-z0-9_]+`)

// dbName returns a unique database name that hints at the test it belongs to.
func dbName(test string) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	hint := unsafeRE.ReplaceAllString(strings.ToLower(test), "_")
	const max = 63 - len("t_") - 12 - 1
	if len(hint) > max {
		hint = hint[len(hint)-max:]
	}
	return "t_" + hex.EncodeToString(b[:]) + "_" + strings.Trim(hint, "_")
}

// server is a running throwaway PostgreSQL server.
type server struct {
	dir     string
	logPath string
	url     string
	bin     string
	cred    *syscall.Credential
	// durable makes a commit return only once its WAL is written, so that
	// an immediate shutdown loses no committed transaction, as on a
	// production server; the shared server trades that for speed.
	durable bool
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// start creates a cluster in a new temporary directory and starts a server on it.
func start() (*server, error) { return startServer(false) }

// startServer is start, durable or not.
func startServer(durable bool) (*server, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "no8s-pg-")
	if err != nil {
		return nil, fmt.Errorf("create server directory: %w", err)
	}
	s := &server{dir: dir, logPath: filepath.Join(dir, "postgres.log"), durable: durable}
	if err := s.init(bin); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *server) init(bin string) error {
	cred, superuser, err := credential(s.dir)
	if err != nil {
		return err
	}
	data := filepath.Join(s.dir, "data")

	var out bytes.Buffer
	initdb := exec.Command(filepath.Join(bin, "initdb"),
		"-D", data, "-U", superuser, "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.Stdout, initdb.Stderr = &out, &out
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := initdb.Run(); err != nil {
		return fmt.Errorf("%s failed: %w\n%s", initdb, err, out.String())
	}

	s.bin, s.cred = bin, cred
	s.url = (&url.URL{
		Scheme:   "postgres",
		User:     url.User(superuser),
		Path:     "/postgres",
		RawQuery: url.Values{"host": {s.dir}, "sslmode": {"disable"}}.Encode(),
	}).String()
	return s.launch()
}

// launch starts the server on the cluster init made and waits until it
// accepts connections.
func (s *server) launch() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logf.Close() // the child keeps its own descriptor
	s.exited, s.waitErr = make(chan struct{}), nil
	syncCommit := "off"
	if s.durable {
		syncCommit = "on"
	}
	s.cmd = exec.Command(filepath.Join(s.bin, "postgres"),
		"-D", filepath.Join(s.dir, "data"),
		"-k", s.dir,
		"-c", "listen_addresses=",
		"-c", "fsync=off",
		"-c", "synchronous_commit="+syncCommit,
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "shared_buffers=64MB",
	)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// SIGQUIT is PostgreSQL's immediate shutdown: the postmaster takes its
	// backends down with it when the test binary dies without calling Main.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.cmd.Path, err)
	}
	cmd, exited := s.cmd, s.exited
	go func() {
		err := cmd.Wait()
		s.waitErr = err
		close(exited)
	}()
	if err := s.waitReady(); err != nil {
		s.stop()
		return err
	}
	return nil
}

// waitReady connects until the server accepts connections, the server
// exits, or the start-up deadline passes.
func (s *server) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	retry := time.NewTicker(20 * time.Millisecond)
	defer retry.Stop()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(attempt, s.url)
		cancelAttempt()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited during start-up: %v%s", s.waitErr, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("postgres did not accept connections within %s: %w%s", startTimeout, err, s.logTail())
		case <-retry.C:
		}
	}
}

// stop shuts the server down quickly and removes its directory.
func (s *server) stop() error {
	var errs []error
	if err := s.shutdown(syscall.SIGINT); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove server directory: %w", err))
	}
	return errors.Join(errs...)
}

// shutdown sends the postmaster sig (SIGINT: fast shutdown, sessions are
// ended; SIGQUIT: immediate shutdown, as in a crash, recovered from the WAL
// at the next start) and waits until it exits.
func (s *server) shutdown(sig syscall.Signal) error {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop postgres: %w", err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("postgres did not stop within 30s; killed it%s", s.logTail())
	}
}

// Server is a throwaway PostgreSQL server of a test's own, for tests that
// stop or restart it, which they must not do to the server other tests share.
type Server struct {
	s *server
}

// NewServer starts a server that is stopped, and its directory removed, when
// the test ends. Unlike the shared server, it commits synchronously: an
// immediate shutdown is a crash that loses no committed transaction, as on
// a production server. It fails the test, never skips it, when the binaries
// are missing. NO8S_TEST_DATABASE_URL does not apply: the test must own the
// server.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s, err := startServer(true)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return &Server{s: s}
}

// URL returns the connection URL of a new, empty database on the server.
// Its host is the server's socket folder, so the URL stays valid across
// restarts.
func (srv *Server) URL(t testing.TB) string {
	t.Helper()
	return createDatabase(t, srv.s.url)
}

// Restart shuts the server down, "fast" (sessions ended, a clean shutdown
// checkpoint) or "immediate" (processes quit at once, as in a crash; the
// next start recovers from the WAL), and starts it again on the same
// cluster and socket. It returns once the server accepts connections.
func (srv *Server) Restart(t testing.TB, mode string) {
	t.Helper()
	srv.Stop(t, mode)
	srv.Start(t)
}

// Stop shuts the server down as Restart does, and leaves it down until Start.
func (srv *Server) Stop(t testing.TB, mode string) {
	t.Helper()
	sig := syscall.SIGINT
	switch mode {
	case "fast":
	case "immediate":
		sig = syscall.SIGQUIT
	default:
		t.Fatalf("pgtest: unknown shutdown mode %q (fast or immediate)", mode)
	}
	if err := srv.s.shutdown(sig); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
}

// Start starts a server that Stop shut down.
func (srv *Server) Start(t testing.TB) {
	t.Helper()
	if err := srv.s.launch(); err != nil {
		t.Fatalf("pgtest: restart: %v", err)
	}
}

// logTail returns the last lines of the server log, for error messages.
func (s *server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "\nlast lines of the server log " + s.logPath + ":\n\t" + strings.Join(lines, "\n\t")
}

// credential returns who the server runs as: nil (the current user) or, when
// running as root, which PostgreSQL refuses, the postgres user, to whom dir
// is then given. It also returns the name of the cluster's superuser.
func credential(dir string) (*syscall.Credential, string, error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return nil, "", fmt.Errorf("look up the current user: %w", err)
		}
		return nil, u.Username, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, "", fmt.Errorf("running as root, the test server must run as the postgres user, but: %w (%s)", err, installHint)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, "", fmt.Errorf("uid of user postgres: %w", err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, "", fmt.Errorf("gid of user postgres: %w", err)
	}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		return nil, "", fmt.Errorf("give %s to user postgres: %w", dir, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, "postgres", nil
}

// findBinaries returns the directory holding initdb and postgres.
func findBinaries() (string, error) { return findBinariesIn("/usr/lib/postgresql/*/bin") }

// findBinariesIn looks on PATH, then in the directories matching glob, the
// highest version first.
func findBinariesIn(glob string) (string, error) {
	if initdb, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(initdb)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob(glob)
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, dir := range dirs {
		if executable(filepath.Join(dir, "initdb")) && executable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL binaries initdb and postgres not found on PATH or in %s: %s", glob, installHint)
}

// versionOf returns the numeric version in /usr/lib/postgresql/<version>/bin.
func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
