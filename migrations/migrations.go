// Package migrations holds the SQL schema migrations of every store backend,
// embedded in the binary, and the loader that turns a directory of numbered
// files into an ordered, gap-checked list.
//
// A migration file is named NNNN_description.sql, where NNNN is its version:
// a decimal number, zero-padded to at least four digits, starting at 0001
// with no gaps. Applying the migrations (and recording which ones ran) is the
// job of each backend's runner.
package migrations

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Postgres holds the PostgreSQL migrations under the directory "postgres".
//
//go:embed postgres/*.sql
var Postgres embed.FS

// SQLite holds the SQLite migrations under the directory "sqlite".
//
//go:embed sqlite/*.sql
var SQLite embed.FS

// Migration is one numbered schema change.
type Migration struct {
	// Version is the number the file name starts with; versions run 1, 2, 3, ...
	Version int
	// Name is the description part of the file name, without the number and extension.
	Name string
	// SQL is the file's content.
	SQL string
}

// fileRE matches a well-formed migration file name.
var fileRE = regexp.MustCompile(`^([0-9]{4,})_([a-z0-9][a-z0-9_]*)\.sql$`)

// Load reads the migrations in dir of fsys and returns them ordered by
// version. Files that do not end in .sql are ignored. It fails, naming the
// files concerned, when a .sql file is not named NNNN_description.sql, when
// two files share a version, when the first version is not 1, or when a
// version is missing between the first and the last.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations directory %s: %w", dir, err)
	}
	var (
		migs []Migration
		errs []error
	)
	files := map[int][]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		name := path.Join(dir, e.Name())
		m := fileRE.FindStringSubmatch(e.Name())
		if m == nil {
			errs = append(errs, fmt.Errorf("migration %s: file name must look like 0001_description.sql (lower case letters, digits and underscores)", name))
			continue
		}
		v, err := strconv.Atoi(m[1])
		if err != nil {
			errs = append(errs, fmt.Errorf("migration %s: version %q: %w", name, m[1], err))
			continue
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		files[v] = append(files[v], name)
		migs = append(migs, Migration{Version: v, Name: m[2], SQL: string(b)})
	}
	sort.SliceStable(migs, func(i, j int) bool { return migs[i].Version < migs[j].Version })

	versions := make([]int, 0, len(files))
	for v := range files {
		versions = append(versions, v)
	}
	sort.Ints(versions)
	for _, v := range versions {
		if len(files[v]) > 1 {
			errs = append(errs, fmt.Errorf("migrations %s share version %d", strings.Join(files[v], ", "), v))
		}
	}
	if len(versions) > 0 && versions[0] != 1 {
		errs = append(errs, fmt.Errorf("migrations must start at version 1, but the first is %s", files[versions[0]][0]))
	}
	for i := 1; i < len(versions); i++ {
		if prev, cur := versions[i-1], versions[i]; cur != prev+1 {
			errs = append(errs, fmt.Errorf("migrations have a gap between %s and %s: version %d is missing", files[prev][0], files[cur][0], prev+1))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("load migrations from %s: %w", dir, errors.Join(errs...))
	}
	return migs, nil
}
