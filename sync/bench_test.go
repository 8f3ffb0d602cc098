package sync_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/sync"
)

// The benchmark repository: 10 types and 10,000 resources in 100 files.
const (
	benchTypes     = 10
	benchResources = 10_000
	benchPerFile   = 100
)

func benchTypeDoc(i int) string {
	return fmt.Sprintf(`apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Kind%d}
spec:
  group: bench.example.com
  action: noop
  versions:
    - name: v1
      schema:
        type: object
        required: [size, region]
        properties:
          size: {type: integer, minimum: 1}
          region: {type: string, enum: [eu, us, ap]}
          replicas: {type: integer, default: 1}
          tags: {type: object, additionalProperties: {type: string}}
          window: {type: object, default: {}, properties: {day: {type: string, default: sun}}}
`, i)
}

func benchFile(f, size int) string {
	var b strings.Builder
	for i := f * benchPerFile; i < (f+1)*benchPerFile; i++ {
		fmt.Fprintf(&b, "---\napiVersion: bench.example.com/v1\nkind: Kind%d\nmetadata:\n  name: res-%05d\n  labels: {team: t%d}\nspec:\n  size: %d\n  region: eu\n  tags: {owner: bench, cost: c%d}\n",
			i%benchTypes, i, i%7, size+i, i%13)
	}
	return b.String()
}

// benchRepo makes the repository as real commits and a Git source over it.
func benchRepo(b *testing.B) (*gittest.Repo, *git.Source) {
	b.Helper()
	repo := gittest.NewRepo(b)
	files := map[string]string{}
	for i := range benchTypes {
		files[fmt.Sprintf("types/kind%d.yaml", i)] = benchTypeDoc(i)
	}
	for f := range benchResources / benchPerFile {
		files[fmt.Sprintf("resources/r%03d.yaml", f)] = benchFile(f, 1)
	}
	repo.Write(files)
	repo.Commit("Generate the benchmark repository")
	src, err := git.New(git.Config{Name: "bench", URL: repo.URL(), CacheDir: filepath.Join(b.TempDir(), "cache"), Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	return repo, src
}

func benchStore(b *testing.B) store.Store {
	b.Helper()
	st, err := postgres.Open(b.Context(), pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	if err := st.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	return st
}

var benchTarget = sync.Target{Name: "bench", Kind: store.SourceGit, Prune: sync.Prune{Enabled: true}}

func fetchSnap(b *testing.B, src source.Source) *source.Snapshot {
	b.Helper()
	snap, err := src.Fetch(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	return snap
}

// BenchmarkSyncCold syncs the whole repository into an empty database with
// a new Syncer (nothing cached), as an agent's first start does.
func BenchmarkSyncCold(b *testing.B) {
	_, src := benchRepo(b)
	snap := fetchSnap(b, src)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		st := benchStore(b)
		s := sync.New(st, nil)
		b.StartTimer()
		res, err := s.Sync(b.Context(), benchTarget, snap, false)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Plan.Creates) != benchResources {
			b.Fatalf("%d created", len(res.Plan.Creates))
		}
	}
	b.ReportMetric(float64(benchResources), "resources")
}

// BenchmarkSyncSameRevision is the steady state: the source's head has not
// moved, so the sync must cost almost nothing.
func BenchmarkSyncSameRevision(b *testing.B) {
	_, src := benchRepo(b)
	snap := fetchSnap(b, src)
	s := sync.New(benchStore(b), nil)
	if _, err := s.Sync(b.Context(), benchTarget, snap, false); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		res, err := s.Sync(b.Context(), benchTarget, snap, false)
		if err != nil || !res.Skipped {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

// BenchmarkFetchUnchanged is the Git side of the steady state: ls-remote
// finds the head unchanged and nothing is fetched.
func BenchmarkFetchUnchanged(b *testing.B) {
	_, src := benchRepo(b)
	fetchSnap(b, src)
	b.ResetTimer()
	for range b.N {
		fetchSnap(b, src)
	}
}

// BenchmarkSyncOneFileChanged commits a change to one resource in one file,
// fetches it, and times the sync of the new commit: exactly one generation
// goes up. The fetch is reported on its own (fetch-ms/op): it is go-git's
// work, and a depth-1 fetch sends the whole tree of the new commit again.
func BenchmarkSyncOneFileChanged(b *testing.B) {
	repo, src := benchRepo(b)
	s := sync.New(benchStore(b), nil)
	if _, err := s.Sync(b.Context(), benchTarget, fetchSnap(b, src), false); err != nil {
		b.Fatal(err)
	}
	var fetching time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		// Resource res-00000 (the first of file r000) changes size each round.
		content := benchFile(0, 1)
		content = strings.Replace(content, "size: 1\n", fmt.Sprintf("size: %d\n", 1000+i), 1)
		repo.Write(map[string]string{"resources/r000.yaml": content})
		repo.Commit(fmt.Sprintf("Resize res-00000 (%d)", i))
		start := time.Now()
		snap := fetchSnap(b, src)
		fetched := time.Now()
		b.StartTimer()
		res, err := s.Sync(b.Context(), benchTarget, snap, false)
		if err != nil {
			b.Fatal(err)
		}
		fetching += fetched.Sub(start)
		if len(res.Plan.Updates) != 1 || res.Plan.Changes() != 1 {
			b.Fatalf("plan %s, want exactly one generation bump", res.Plan.Summary())
		}
	}
	b.ReportMetric(float64(fetching.Milliseconds())/float64(b.N), "fetch-ms/op")
}

// BenchmarkParseOnly decodes and validates the repository's files from
// memory with nothing cached: the reference cost of a cold sync's parsing.
func BenchmarkParseOnly(b *testing.B) {
	_, src := benchRepo(b)
	snap := fetchSnap(b, src)
	b.ResetTimer()
	for range b.N {
		var v manifest.Validator
		set, err := v.ValidateFiles(snap.Files, nil)
		if err != nil || len(set.Resources) != benchResources {
			b.Fatal(err)
		}
	}
}
