package migrations

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

func TestLoad(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"m/0002_add_index.sql":   file("CREATE INDEX i ON t (c);"),
		"m/0001_initial.sql":     file("CREATE TABLE t (c int);"),
		"m/0003_more_things.sql": file("ALTER TABLE t ADD d int;"),
		"m/README.md":            file("not a migration"),
		"other/0009_x.sql":       file("outside the directory"),
	}
	got, err := Load(fsys, "m")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := []Migration{
		{Version: 1, Name: "initial", SQL: "CREATE TABLE t (c int);"},
		{Version: 2, Name: "add_index", SQL: "CREATE INDEX i ON t (c);"},
		{Version: 3, Name: "more_things", SQL: "ALTER TABLE t ADD d int;"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d migrations, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("migration %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestLoadEmpty(t *testing.T) {
	t.Parallel()
	got, err := Load(fstest.MapFS{"m/notes.txt": file("x")}, "m")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("got %+v, want none", got)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fsys fstest.MapFS
		// want are substrings the error must contain, typically the file names.
		want []string
	}{
		{
			name: "duplicate version",
			fsys: fstest.MapFS{
				"m/0001_initial.sql": file("a"),
				"m/0002_one.sql":     file("b"),
				"m/0002_two.sql":     file("c"),
			},
			want: []string{"m/0002_one.sql", "m/0002_two.sql", "share version 2"},
		},
		{
			name: "gap",
			fsys: fstest.MapFS{
				"m/0001_initial.sql": file("a"),
				"m/0002_next.sql":    file("b"),
				"m/0004_later.sql":   file("c"),
			},
			want: []string{"m/0002_next.sql", "m/0004_later.sql", "version 3 is missing"},
		},
		{
			name: "does not start at 1",
			fsys: fstest.MapFS{
				"m/0002_initial.sql": file("a"),
				"m/0003_next.sql":    file("b"),
			},
			want: []string{"start at version 1", "m/0002_initial.sql"},
		},
		{
			name: "starts at 0",
			fsys: fstest.MapFS{
				"m/0000_initial.sql": file("a"),
				"m/0001_next.sql":    file("b"),
			},
			want: []string{"start at version 1", "m/0000_initial.sql"},
		},
		{
			name: "no number",
			fsys: fstest.MapFS{
				"m/0001_initial.sql": file("a"),
				"m/initial.sql":      file("b"),
			},
			want: []string{"m/initial.sql", "0001_description.sql"},
		},
		{
			name: "too few digits",
			fsys: fstest.MapFS{
				"m/0001_initial.sql": file("a"),
				"m/2_next.sql":       file("b"),
			},
			want: []string{"m/2_next.sql"},
		},
		{
			name: "no description",
			fsys: fstest.MapFS{
				"m/0001.sql": file("a"),
			},
			want: []string{"m/0001.sql"},
		},
		{
			name: "upper case description",
			fsys: fstest.MapFS{
				"m/0001_Initial.sql": file("a"),
			},
			want: []string{"m/0001_Initial.sql"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Load(tt.fsys, "m")
			if err == nil {
				t.Fatalf("Load succeeded with %+v, want an error", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadMissingDirectory(t *testing.T) {
	t.Parallel()
	_, err := Load(fstest.MapFS{}, "nope")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestEmbedded(t *testing.T) {
	t.Parallel()
	for _, set := range []struct {
		dir  string
		fsys fs.FS
	}{{"postgres", Postgres}, {"sqlite", SQLite}} {
		t.Run(set.dir, func(t *testing.T) {
			t.Parallel()
			migs, err := Load(set.fsys, set.dir)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if len(migs) == 0 || migs[0].Version != 1 || migs[0].Name != "initial" {
				t.Fatalf("first migration = %+v, want version 1 named initial", migs)
			}
			for _, m := range migs {
				if strings.TrimSpace(m.SQL) == "" {
					t.Errorf("migration %d_%s is empty", m.Version, m.Name)
				}
			}
		})
	}
}
