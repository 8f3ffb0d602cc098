package manifest

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kyvernoCRD returns Kyverno's ClusterPolicy CRD as Kyverno publishes it
// (testdata/crds/kyverno-clusterpolicies.yaml.gz, see NOTICE.md there).
func kyvernoCRD(t *testing.T) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "crds", "kyverno-clusterpolicies.yaml.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != "fb041ee35f8e89b5bca566bb6e00cd67fccc30be8859998757333f2a40d79655" || len(data) != 1423961 {
		t.Fatalf("the CRD is not the one published: %d bytes, sha256 %s", len(data), got)
	}
	return data
}

// readAndValidate reads a tree as a source does and validates it: the
// problems of both, or the set.
func readAndValidate(t *testing.T, dir string, opts LoadOptions) (*Set, []Problem) {
	t.Helper()
	files, problems, err := ReadDir(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	set, err := (&Validator{Decode: DecodeOptions{MaxExpandedSize: opts.MaxFileSize}}).ValidateFiles(files, nil)
	var verr *ValidationError
	switch {
	case errors.As(err, &verr):
		problems = append(problems, verr.Problems...)
	case err != nil:
		t.Fatal(err)
	}
	SortProblems(problems)
	return set, problems
}

// TestLargePublishedCRD: Kyverno's ClusterPolicy CRD (1.42 MB) loads as
// Kyverno publishes it with the default limit, and Kyverno's own example
// policy validates against it; a file over the limit is refused with a
// problem that names it, its size and the setting.
func TestLargePublishedCRD(t *testing.T) {
	t.Parallel()
	crd := kyvernoCRD(t)
	example, err := os.ReadFile(filepath.Join("testdata", "examples", "kyverno", "restrict-ingress-classes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// A manifest one byte over the default limit: a valid document padded
	// with a comment.
	over := "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: padded}\nspec: {}\n#"
	over += strings.Repeat("x", DefaultMaxFileSize+1-len(over)-1) + "\n"
	tests := []struct {
		name  string
		opts  LoadOptions
		extra map[string]string
		want  []string // problems; nil: the CRD and the example load
	}{
		{"default limit", LoadOptions{}, nil, nil},
		{"the limit is the CRD's size", LoadOptions{MaxFileSize: int64(len(crd))}, nil, nil},
		{"one byte under the CRD's size", LoadOptions{MaxFileSize: int64(len(crd)) - 1}, nil, []string{
			"crds/kyverno.io_clusterpolicies.yaml: file is 1423961 bytes, over the limit of 1423960 bytes (maxFileSize)",
			`policies/restrict-ingress-classes.yaml:2: kind: unknown kind "ClusterPolicy": no ResourceType declares it`}},
		{"the earlier 1 MiB limit", LoadOptions{MaxFileSize: 1 << 20, SizeSetting: "--max-file-size"}, nil, []string{
			"crds/kyverno.io_clusterpolicies.yaml: file is 1423961 bytes, over the limit of 1048576 bytes (--max-file-size)",
			`policies/restrict-ingress-classes.yaml:2: kind: unknown kind "ClusterPolicy": no ResourceType declares it`}},
		{"a file one byte over the default limit", LoadOptions{}, map[string]string{"policies/padded.yaml": over}, []string{
			"policies/padded.yaml: file is 1572865 bytes, over the limit of 1572864 bytes (maxFileSize)"}},
		{"a file one byte over a configured limit", LoadOptions{MaxFileSize: 2 << 20}, map[string]string{"policies/padded.yaml": over + strings.Repeat("#\n", (2<<20-DefaultMaxFileSize)/2)}, []string{
			"policies/padded.yaml: file is 2097153 bytes, over the limit of 2097152 bytes (maxFileSize)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{"crds/kyverno.io_clusterpolicies.yaml": string(crd), "policies/restrict-ingress-classes.yaml": string(example)}
			for k, v := range tt.extra {
				files[k] = v
			}
			set, ps := readAndValidate(t, writeTree(t, files), tt.opts)
			var got []string
			for _, p := range ps {
				got = append(got, p.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("problems\n %q\nwant\n %q", got, tt.want)
			}
			if tt.want != nil {
				return
			}
			if len(set.Types) != 1 || set.Types[0].Name != "ClusterPolicy" || set.Types[0].Group != "kyverno.io" {
				t.Fatalf("types %+v", set.Types)
			}
			if len(set.Resources) != 1 || set.Resources[0].Name != "restrict-ingress-classes" ||
				!strings.Contains(string(set.Resources[0].Spec), `"kubernetes.io/ingress.class":"F5 | nginx"`) {
				t.Errorf("resources %+v", set.Resources)
			}
		})
	}
}

// TestCrossplaneComposition: a Composition as Crossplane's own tests write
// one, named xnopresources.nop.example.org (a DNS subdomain, as the API
// server requires of it), loads unchanged against Crossplane's CRD; the
// same CRD asking for label names refuses it.
func TestCrossplaneComposition(t *testing.T) {
	t.Parallel()
	crd, err := os.ReadFile(filepath.Join("testdata", "crds", "crossplane-compositions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join("testdata", "examples", "crossplane", "composition-xnopresources.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	labelCRD := strings.Replace(string(crd), "  annotations:\n", "  annotations:\n    no8s.io/name-format: label\n", 1)
	if labelCRD == string(crd) {
		t.Fatal("the CRD has no annotations to add to")
	}
	tests := []struct {
		name, crd string
		want      []string
	}{
		{"as published", string(crd), nil},
		{"label names asked", labelCRD, []string{`composition.yaml:4: metadata.name: Invalid value: "xnopresources.nop.example.org": ` + wantLabelRule}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set, ps := readAndValidate(t, writeTree(t, map[string]string{"crd.yaml": tt.crd, "composition.yaml": string(example)}), LoadOptions{})
			var got []string
			for _, p := range ps {
				got = append(got, p.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("problems\n %q\nwant\n %q", got, tt.want)
			}
			if tt.want != nil {
				return
			}
			if len(set.Resources) != 1 {
				t.Fatalf("resources %+v", set.Resources)
			}
			r := set.Resources[0]
			if r.Kind != "Composition" || r.Name != "xnopresources.nop.example.org" || r.Group != "apiextensions.crossplane.io" ||
				!strings.Contains(string(r.Spec), `"compositeTypeRef":{"apiVersion":"nop.example.org/v1alpha1","kind":"XNopResource"}`) ||
				!strings.Contains(string(r.Spec), `"step":"be-a-dummy"`) {
				t.Errorf("resource %s/%s %s", r.Kind, r.Name, r.Spec)
			}
		})
	}
}
