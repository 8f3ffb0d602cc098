package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/sync"
)

// completions runs cobra's __complete for args and an empty word, and
// returns the candidates and the directive line.
func completions(t *testing.T, args ...string) (names []string, directive string) {
	t.Helper()
	code, out, errOut := runCLI(t, append(append([]string{"__complete"}, args...), "")...)
	if code != 0 {
		t.Fatalf("__complete %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, ":") {
			directive = line
			continue
		}
		names = append(names, strings.SplitN(line, "\t", 2)[0])
	}
	return names, directive
}

// Shell completion offers the names the store holds after every verb that
// takes one, from --database or --config's database (whose secrets need
// not be set), and nothing, quickly, when the database does not answer.
func TestCompletionOffersNamesFromTheStore(t *testing.T) {
	t.Parallel()
	url := seedNamed(t)
	cfgPath := filepath.Join(t.TempDir(), "no8s.yaml")
	cfg := fmt.Sprintf("database: %q\nlisten: 127.0.0.1:1\napi: {writeTokenEnv: NO8S_TEST_UNSET_COMPLETION_%d}\n", url, time.Now().UnixNano())
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	db, conf := []string{"--database", url}, []string{"--config", cfgPath}
	with := func(flags []string, args ...string) []string { return append(args, flags...) }
	before := func(flags []string, args ...string) []string {
		return append(append([]string{args[0]}, flags...), args[1:]...)
	}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{with(db, "get", "res"), []string{"w1", "w2"}},
		{with(db, "get", "resources", "-A"), []string{"w1", "w2"}},
		{with(db, "get", "res", "-n", "other"), nil},
		{with(db, "get", "src"), []string{"kept"}},
		{with(db, "get", "rt"), []string{"Widget"}},
		{before(db, "get", "types"), []string{"Widget"}},
		{with(conf, "get", "res"), []string{"w1", "w2"}},
		{with(db, "get", "history"), nil},
		{with(db, "get", "res", "w1"), nil},
		{with(db, "delete", "source"), nil}, // none is orphaned
		{with(conf, "describe", "resource"), []string{"Widget/w1", "Widget/w2"}},
		{with(conf, "describe", "src"), []string{"kept"}},
		{with(conf, "reconcile", "res"), []string{"Widget/w1", "Widget/w2"}},
		{with(conf, "suspend", "resource"), []string{"Widget/w1", "Widget/w2"}},
		{with(conf, "resume", "source"), []string{"kept"}},
		{with(conf, "sync", "source"), []string{"kept"}},
		{with(conf, "approve", "source"), []string{"kept"}},
	} {
		got, directive := completions(t, tt.args...)
		if !slices.Equal(got, tt.want) || directive != ":4" {
			t.Errorf("complete %s: %q %s, want %q and :4 (no files)", strings.Join(tt.args, " "), got, directive, tt.want)
		}
	}
	st := openTestStore(t, url)
	if _, err := sync.New(st, nil).MarkOrphans(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := completions(t, with(db, "delete", "source")...); !slices.Equal(got, []string{"kept"}) {
		t.Errorf("complete delete source: %q, want the orphaned source", got)
	}

	// A database that refuses, and one that never answers: no names,
	// within the completion's timeout.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for _, database := range []string{"postgres://no8s@127.0.0.1:1/no8s?connect_timeout=60", "postgres://no8s@" + silent.Addr().String() + "/no8s?connect_timeout=60",
		filepath.Join(t.TempDir(), "missing.db")} {
		start := time.Now()
		got, directive := completions(t, "get", "res", "--database", database)
		if took := time.Since(start); len(got) != 0 || directive != ":4" || took > completionTimeout+time.Second {
			t.Errorf("complete with database %s: %q %s after %v; want nothing within %v", database, got, directive, took, completionTimeout)
		}
	}
}
