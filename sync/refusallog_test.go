package sync_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/source/git"
	"github.com/no8s/no8s-agent/source/git/commitsig"
	"github.com/no8s/no8s-agent/source/git/commitsig/sigtest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/sync"
)

// logRecords is a slog handler's output, safe for concurrent writes.
type logRecords struct {
	mu  gosync.Mutex
	buf bytes.Buffer
}

func (l *logRecords) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// records returns the records logged so far, each as its JSON fields.
func (l *logRecords) records(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// count counts the records of msg at level or above.
func (l *logRecords) count(t *testing.T, msg string, level slog.Level) int {
	t.Helper()
	n := 0
	for _, r := range l.records(t) {
		var lv slog.Level
		if s, _ := r["level"].(string); lv.UnmarshalText([]byte(s)) == nil && lv >= level && r["msg"] == msg {
			n++
		}
	}
	return n
}

// TestRefusalsLoggedOncePerRevision polls a Git source with a signature
// policy every few milliseconds: an unsigned head is refused with reason
// SignatureRejected, naming the commit and what is wrong with it, and the
// refusal is logged once however many polls see the same head; a signed
// head with an invalid manifest is refused as invalid, once too.
func TestRefusalsLoggedOncePerRevision(t *testing.T) {
	t.Parallel()
	keys := sigtest.New(t)
	bob := keys.SSH("bob")
	signers := filepath.Join(t.TempDir(), "allowed_signers")
	keys.WriteAllowedSigners(signers, bob)
	verifier, err := commitsig.New(commitsig.Config{SSHAllowedSignersFile: signers})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := newStore(t)
	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 1}")})
	repo.CommitSigned("signed", keys.Env(), sigtest.SignWithSSH(bob)...)

	var out logRecords
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	src, err := git.New(git.Config{Name: "infra", URL: repo.URL(), Ref: git.Ref{Branch: "main"},
		CacheDir: filepath.Join(t.TempDir(), "cache"), Timeout: 20 * time.Second, Logger: log,
		Verify: &git.Verify{Mode: git.VerifyHead, Verifier: verifier}})
	if err != nil {
		t.Fatal(err)
	}
	tg := sync.Target{Name: "infra", Kind: "git", URL: repo.URL(), Prune: sync.Prune{Enabled: true}}
	r := sync.NewRunner(sync.New(st, log), []sync.Job{{Source: src, Target: tg, Interval: 20 * time.Millisecond}}, log)
	attempts := startRunner(t, r)
	if a := next(t, attempts, 30*time.Second); a.err != nil {
		t.Fatalf("first sync: %v", a.err)
	}

	// polls waits for n more attempts and returns the last error.
	polls := func(n int) error {
		var err error
		for range n {
			err = next(t, attempts, 30*time.Second).err
		}
		return err
	}
	repo.Write(map[string]string{"w.yaml": widget("a", "{size: 2}")})
	unsigned := repo.Commit("unsigned")
	deadline := time.Now().Add(30 * time.Second)
	var serr *sync.Error
	for err := polls(1); !errors.As(err, &serr); err = polls(1) {
		if time.Now().After(deadline) {
			t.Fatal("the unsigned head was not refused within 30s")
		}
	}
	if serr.Reason != sync.ReasonSignatureRejected || serr.Message != "refused by the source's signature policy: commit "+unsigned[:8]+": not signed" {
		t.Errorf("refusal of the unsigned head: %v", serr)
	}
	if len(serr.Problems) != 1 || serr.Problems[0].File != "" || !strings.Contains(serr.Problems[0].Message, unsigned[:8]) {
		t.Errorf("problems of the unsigned head: %+v", serr.Problems)
	}
	if s, err := st.GetSource(t.Context(), "infra"); err != nil || !strings.HasPrefix(s.Message, sync.ReasonSignatureRejected+": ") {
		t.Errorf("source status: %+v, %v", s, err)
	}
	_ = polls(10)
	if n := out.count(t, "sync refused", slog.LevelWarn); n != 1 {
		t.Errorf("the unsigned head's refusal was logged %d times over 10 polls, want once", n)
	}
	if n := out.count(t, "commit signatures refused", slog.LevelDebug); n != 1 {
		t.Errorf("the source logged its verdict on the unsigned head %d times over 10 polls, want once", n)
	}

	// A signed head with an invalid manifest: refused as invalid, once.
	repo.Write(map[string]string{"w.yaml": widget("a", "{size: big}")})
	repo.CommitSigned("signed but invalid", keys.Env(), sigtest.SignWithSSH(bob)...)
	deadline = time.Now().Add(30 * time.Second)
	for {
		err := polls(1)
		if errors.As(err, &serr) && serr.Reason == sync.ReasonValidationFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the invalid head was not refused within 30s: %v", err)
		}
	}
	_ = polls(10)
	if n := out.count(t, "sync refused", slog.LevelWarn); n != 2 {
		t.Errorf("two refused revisions were logged %d times over 10 polls each, want twice", n)
	}
	if n := out.count(t, "commit signatures refused", slog.LevelDebug); n != 1 {
		t.Errorf("the source logged a refused verdict %d times, want once", n)
	}
}
