package source

import (
	"testing"
	"testing/fstest"

	"github.com/no8s/no8s-agent/manifest"
)

func file(path, data string) manifest.File {
	return manifest.File{Path: path, Data: []byte(data), Hash: manifest.HashJSON([]byte(data))}
}

func TestDigestRevision(t *testing.T) {
	t.Parallel()
	a, b := file("a.yaml", "a: 1\n"), file("sub/b.yaml", "b: 1\n")
	base := DigestRevision([]manifest.File{a, b}, nil)
	tests := []struct {
		name     string
		files    []manifest.File
		problems []manifest.Problem
		same     bool
	}{
		{"same files, other order", []manifest.File{b, a}, nil, true},
		{"content changed", []manifest.File{a, file("sub/b.yaml", "b: 2\n")}, nil, false},
		{"file renamed", []manifest.File{a, file("sub/c.yaml", "b: 1\n")}, nil, false},
		{"file added", []manifest.File{a, b, file("c.yaml", "")}, nil, false},
		{"a file turned unusable", []manifest.File{a, b}, []manifest.Problem{{File: "big.yaml", Message: "file is 2000000 bytes, over the limit"}}, false},
		// Paths and contents are separated, so moving a byte across the boundary matters.
		{"boundary", []manifest.File{{Path: "a.yamla", Hash: a.Hash}, b}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := DigestRevision(tt.files, tt.problems)
			if (got == base) != tt.same {
				t.Errorf("revision %s vs %s, want same=%v", got, base, tt.same)
			}
		})
	}
	p1 := []manifest.Problem{{File: "x.yaml", Message: "m"}, {File: "y.yaml", Message: "n"}}
	p2 := []manifest.Problem{p1[1], p1[0]}
	if DigestRevision(nil, p1) != DigestRevision(nil, p2) {
		t.Error("problem order changed the revision")
	}
}

func TestReadTreeHonoursIgnoreFile(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		IgnoreFile:              {Data: []byte("# comment\ndrafts/\n*.tmp.yaml\n!keep.tmp.yaml\n\n")},
		"a.yaml":                {Data: []byte("a: 1\n")},
		"drafts/x.yaml":         {Data: []byte("x: 1\n")},
		"deep/drafts/y.yaml":    {Data: []byte("y: 1\n")},
		"scratch.tmp.yaml":      {Data: []byte("s: 1\n")},
		"keep.tmp.yaml":         {Data: []byte("k: 1\n")},
		"nested/other.tmp.yaml": {Data: []byte("o: 1\n")},
	}
	files, problems, err := ReadTree(fsys, manifest.LoadOptions{})
	if err != nil || len(problems) != 0 {
		t.Fatal(err, problems)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
	}
	want := []string{"a.yaml", "keep.tmp.yaml"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("files %v, want %v", got, want)
	}
	// Without an ignore file, nothing extra is skipped.
	delete(fsys, IgnoreFile)
	files, _, _ = ReadTree(fsys, manifest.LoadOptions{})
	if len(files) != 6 {
		t.Errorf("%d files without an ignore file, want 6", len(files))
	}
}
