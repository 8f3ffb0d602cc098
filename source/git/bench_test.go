package git

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/source/git/gittest"
)

// benchFiles is the size of the benchmark repository: 10 folders of 1,000
// manifests, one resource each.
const benchFiles = 10_000

// benchRepo makes a repository of benchFiles manifests, in a folder per
// type or, flat, all at the root.
func benchRepo(b *testing.B, flat bool) *gittest.Repo {
	b.Helper()
	r := gittest.NewRepo(b)
	for i := range benchFiles {
		dir := filepath.Join(r.Dir, fmt.Sprintf("type%d", i%10))
		if flat {
			dir = r.Dir
		}
		if i < 10 && !flat {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		doc := fmt.Sprintf("apiVersion: example.com/v1\nkind: Type%d\nmetadata:\n  name: res%05d\nspec:\n  replicas: %d\n  image: registry.example.com/app%d:1.0.%d\n",
			i%10, i, i%7, i, i%13)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("res%05d.yaml", i)), []byte(doc), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	r.Commit("many")
	return r
}

// benchTransports serves r over file:// and smart HTTP.
func benchTransports(b *testing.B, r *gittest.Repo) []struct{ name, url string } {
	gs := gittest.NewServer(b, filepath.Dir(r.Dir), "user", "s3cret-pass")
	return []struct{ name, url string }{{"file", r.URL()}, {"http", gs.URL + "/repo/.git"}}
}

func benchSource(b *testing.B, url string, e engine, cache string) *Source {
	b.Helper()
	cfg := Config{Name: "bench", URL: url, CacheDir: cache}
	if strings.HasPrefix(url, "http") {
		cfg.Auth = Auth{Username: "user", Password: "s3cret-pass"}
	}
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	s.engine = e
	return s
}

var benchEngines = []engine{engineAuto, engineGit, engineGoGit}

// BenchmarkFetchCold measures a first fetch and snapshot of 10,000 files
// into an empty cache.
func BenchmarkFetchCold(b *testing.B) {
	r := benchRepo(b, false)
	for _, tr := range benchTransports(b, r) {
		for _, e := range benchEngines {
			b.Run(e.String()+"/"+tr.name, func(b *testing.B) {
				for i := range b.N {
					s := benchSource(b, tr.url, e, filepath.Join(b.TempDir(), fmt.Sprint(i)))
					snap, err := s.Fetch(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					if len(snap.Files) != benchFiles {
						b.Fatalf("%d files", len(snap.Files))
					}
				}
			})
		}
	}
}

// BenchmarkFetchIncremental measures the fetch and snapshot of a commit
// changing one file of 10,000, in a folder per type and all at the root.
func BenchmarkFetchIncremental(b *testing.B) {
	for _, flat := range []bool{false, true} {
		b.Run(fmt.Sprintf("flat=%v", flat), func(b *testing.B) { benchFetchIncremental(b, flat) })
	}
}

func benchFetchIncremental(b *testing.B, flat bool) {
	r := benchRepo(b, flat)
	file := "type3/res00003.yaml"
	if flat {
		file = "res00003.yaml"
	}
	for _, tr := range benchTransports(b, r) {
		for _, e := range benchEngines {
			b.Run(e.String()+"/"+tr.name, func(b *testing.B) {
				s := benchSource(b, tr.url, e, b.TempDir())
				if _, err := s.Fetch(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := range b.N {
					b.StopTimer()
					r.Write(map[string]string{file: fmt.Sprintf("apiVersion: example.com/v1\nkind: Type3\nmetadata:\n  name: res00003\nspec:\n  replicas: %d\n", i)})
					head := r.Commit("one file")
					b.StartTimer()
					snap, err := s.Fetch(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					if !strings.HasSuffix(string(snap.Revision), head) || len(snap.Files) != benchFiles {
						b.Fatalf("revision %s with %d files, want %s", snap.Revision, len(snap.Files), head)
					}
				}
			})
		}
	}
}

// BenchmarkSnapshotRebuild measures the snapshot of an unchanged head of
// 10,000 files, past the ls-remote: from the kept contents, and read again
// from the object store when they are not kept.
func BenchmarkSnapshotRebuild(b *testing.B) {
	r := benchRepo(b, false)
	for _, keep := range []bool{true, false} {
		b.Run(fmt.Sprintf("retained=%v", keep), func(b *testing.B) {
			s := benchSource(b, r.URL(), engineGit, b.TempDir())
			if !keep {
				s.maxRetained = 0
			}
			if _, err := s.Fetch(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				snap, err := s.fromIndex(s.last)
				if err != nil {
					b.Fatal(err)
				}
				if len(snap.Files) != benchFiles {
					b.Fatalf("%d files", len(snap.Files))
				}
			}
		})
	}
}

// BenchmarkSourceMemory reports the heap a source of 10,000 files keeps
// between fetches (held-B), once its snapshot is dropped, with contents
// kept and without.
func BenchmarkSourceMemory(b *testing.B) {
	r := benchRepo(b, false)
	for _, keep := range []bool{true, false} {
		b.Run(fmt.Sprintf("retained=%v", keep), func(b *testing.B) {
			var held uint64
			for range b.N {
				s := benchSource(b, r.URL(), engineAuto, b.TempDir())
				if !keep {
					s.maxRetained = 0
				}
				before := liveHeap()
				if n, err := fetchCount(s); err != nil || n != benchFiles {
					b.Fatalf("fetch: %d files, %v", n, err)
				}
				held = liveHeap() - before
				runtime.KeepAlive(s)
			}
			b.ReportMetric(float64(held), "held-B")
		})
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// fetchCount fetches and drops the snapshot, keeping only its size.
func fetchCount(s *Source) (int, error) {
	snap, err := s.Fetch(context.Background())
	if err != nil {
		return 0, err
	}
	return len(snap.Files), nil
}
