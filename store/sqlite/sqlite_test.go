package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/sqlite"
	"github.com/no8s/no8s-agent/store/storetest"
)

// open returns an unmigrated store on the file at path, closed when t ends.
func open(t testing.TB, path string, opts sqlite.Options) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// migrated returns a migrated store on a fresh file.
func migrated(t testing.TB) *sqlite.Store {
	t.Helper()
	s := open(t, filepath.Join(t.TempDir(), "no8s.db"), sqlite.Options{Exclusive: true})
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return migrated(t) })
}
