package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestValidateExampleRepository(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "validate", "../../examples/repo")
	if code != 0 || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if !strings.Contains(errOut, "valid: 3 resource type(s), 4 resource(s)") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestValidateInvalidExamples(t *testing.T) {
	t.Parallel()
	dir := "../../examples/invalid"
	code, out, _ := runCLI(t, "validate", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if !strings.HasPrefix(l, "../../examples/invalid/") {
			t.Errorf("line does not start with the file path: %q", l)
		}
	}
	// Every broken file is named, with a line number where the file has lines.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !manifest.IsManifestFile(name) || name == "types.yaml" || name == "duplicate-a.yaml" {
			continue
		}
		prefix := filepath.ToSlash(filepath.Join(dir, name)) + ":"
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				found = true
				rest := strings.TrimPrefix(l, prefix)
				// A symlink has no lines; every other problem names one.
				if name != "symlink-outside.yaml" && (rest == "" || rest[0] < '1' || rest[0] > '9') {
					t.Errorf("%s: no line number in %q", name, l)
				}
			}
		}
		if !found {
			t.Errorf("%s is not named in the output", name)
		}
	}
}

func TestValidateJSONOutput(t *testing.T) {
	t.Parallel()
	code, out, _ := runCLI(t, "validate", "../../examples/invalid/wrong-type.yaml", "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var problems []manifest.Problem
	if err := json.Unmarshal([]byte(out), &problems); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	// Validated alone, the file's kind is unknown: its type lives in types.yaml.
	if len(problems) != 1 || problems[0].File != "../../examples/invalid/wrong-type.yaml" ||
		problems[0].Line != 2 || problems[0].Pointer != "/kind" {
		t.Errorf("problems %+v", problems)
	}

	code, out, _ = runCLI(t, "validate", "-o", "json", "../../examples/repo")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("valid repository: exit %d, output %q", code, out)
	}
}

// TestValidateUnknownFields: a misspelt spec field is refused with its
// line and a suggestion; --unknown-fields warn or prune, as a source's
// unknownFields, accept it and say what was done with it.
func TestValidateUnknownFields(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"types.yaml", "unknown-spec-field.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../examples/invalid", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	at := filepath.ToSlash(filepath.Join(dir, "unknown-spec-field.yaml")) + ":8: "
	tests := []struct {
		args         []string
		code         int
		stdout, warn string
	}{
		{nil, 1, at + `unknown field "spec.replcias", did you mean "replicas"? (unknownFields: strict refuses it; warn keeps it, prune drops it)`, ""},
		{[]string{"--unknown-fields", "warn"}, 0, "", "warning: " + at + `unknown field "spec.replcias" kept, did you mean "replicas"?`},
		{[]string{"--unknown-fields", "prune"}, 0, "", "warning: " + at + `unknown field "spec.replcias" dropped, did you mean "replicas"?`},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(t, append(append([]string{"validate"}, tt.args...), dir)...)
		if code != tt.code || strings.TrimSpace(out) != tt.stdout || !strings.Contains(errOut, tt.warn) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, out, errOut, tt.code, tt.stdout, tt.warn)
		}
	}
}

func TestValidateUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"missing path", []string{"validate", "no/such/dir"}, "no such file or directory"},
		{"bad output", []string{"validate", "-o", "xml", "."}, "-o must be text or json"},
		{"two paths", []string{"validate", "a", "b"}, "one PATH at most"},
		{"unknown flag", []string{"validate", "--frobnicate"}, "flag provided but not defined"},
		{"unknown fields mode", []string{"validate", "--unknown-fields", "ignore", "."}, `unknown fields mode "ignore": use strict, warn or prune`},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := runCLI(t, tt.args...)
			if code != 1 || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stderr %q, want 1 and %q", code, errOut, tt.wantErr)
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	if code, out, _ := runCLI(t, "--help"); code != 0 || !strings.Contains(out, "validate") {
		t.Errorf("help: exit %d, %q", code, out)
	}
	if code, out, _ := runCLI(t, "validate", "--help"); code != 0 || !strings.Contains(out, "-max-file-size") {
		t.Errorf("validate --help: exit %d, %q", code, out)
	}
	if code, out, _ := runCLI(t, "version"); code != 0 || !strings.HasPrefix(out, "no8s-agent ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
}

// TestDiffAgainstBase compares two folders without any store, as a CI job
// on a pull request does with checkouts of the base and the head.
func TestDiffAgainstBase(t *testing.T) {
	t.Parallel()
	base := copyTree(t, "../../examples/repo")
	head := copyTree(t, "../../examples/repo")
	dbs := filepath.Join(head, "resources", "databases.yaml")
	data, err := os.ReadFile(dbs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dbs, bytes.Replace(data, []byte("storage_gb: 500"), []byte("storage_gb: 750"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(head, "resources", "dns.json")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "diff", head, "--source", "local", "--base", base, "-o", "markdown")
	if code != 2 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{"**no8s plan:** 0 created, 1 updated, 1 deleted",
		"| update | DatabaseCluster/production-pg | resources/databases.yaml:3 | 2 | `storage_gb: 500 → 750` |",
		"| delete | DNSRecord/db-production | resources/dns.json |"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := runCLI(t, "diff", base, "--source", "local", "--base", base); code != 0 || !strings.Contains(out, "0 created, 0 updated") {
		t.Errorf("a folder against itself: exit %d\n%s", code, out)
	}
	if code, _, errOut := runCLI(t, "diff", head, "--source", "local", "--base", "../../examples/invalid"); code != 1 || !strings.Contains(errOut, "--base") {
		t.Errorf("an invalid base: exit %d, %s", code, errOut)
	}
}

// TestTransitionRulesOffline: validate --base and diff --base hold a CRD's
// transition rules against the base folder, with no store.
func TestTransitionRulesOffline(t *testing.T) {
	t.Parallel()
	crd, err := os.ReadFile("../../manifest/testdata/crds/gateway-api-gatewayclasses.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tree := func(controller string) string {
		dir := t.TempDir()
		for name, data := range map[string]string{
			"crd.yaml": string(crd),
			"gc.yaml":  "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: internet}\nspec:\n  controllerName: " + controller + "\n",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	base, same, changed := tree("example.net/gateway"), tree("example.net/gateway"), tree("example.net/other")
	if code, out, errOut := runCLI(t, "validate", "--base", base, same); code != 0 {
		t.Errorf("unchanged: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, "validate", changed); code != 0 {
		t.Errorf("without a base the change is valid: exit %d\n%s", code, out)
	}
	code, out, _ := runCLI(t, "validate", "--base", base, changed)
	// At the field's line, not the document's.
	if want := filepath.ToSlash(filepath.Join(changed, "gc.yaml")) + ":5: spec.controllerName: Value is immutable"; code != 1 || !strings.Contains(out, want) {
		t.Errorf("validate --base: exit %d, want %q in\n%s", code, want, out)
	}
	code, out, errOut := runCLI(t, "diff", changed, "--source", "local", "--base", base)
	if code != 1 || !strings.Contains(out, "gc.yaml:5: spec.controllerName: Value is immutable") {
		t.Errorf("diff --base: exit %d\n%s\n%s", code, errOut, out)
	}
}

// TestValidateFileSizes: validate reads files up to --max-file-size, by
// default the agent's 1.5 MiB, which Kyverno's ClusterPolicy CRD (1.42 MB)
// is within; a larger file is named with its size and the flag.
func TestValidateFileSizes(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../manifest/testdata/crds/kyverno-clusterpolicies.yaml.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kyverno.yaml"), crd, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.ToSlash(filepath.Join(dir, "kyverno.yaml"))
	tests := []struct {
		name        string
		args        []string
		code        int
		out, stderr string
	}{
		{"default", nil, 0, "", "valid: 1 resource type(s), 0 resource(s)"},
		{"the file's size", []string{"--max-file-size", "1423961"}, 0, "", "valid: 1 resource type(s)"},
		{"a byte less", []string{"--max-file-size", "1423960"}, 1, file + ": file is 1423961 bytes, over the limit of 1423960 bytes (--max-file-size)\n", "1 problem(s) found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runCLI(t, append(append([]string{"validate"}, tt.args...), dir)...)
			if code != tt.code || out != tt.out || !strings.Contains(errOut, tt.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, tt.code, tt.out, tt.stderr)
			}
		})
	}
}

// TestValidateWarnsOfGeneratorMetadata: the metadata a server sets is
// ignored, with one warning per file on stderr; the files are valid.
func TestValidateWarnsOfGeneratorMetadata(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data, err := os.ReadFile("../../examples/repo/resources/network.yaml")
	if err != nil {
		t.Fatal(err)
	}
	types, err := os.ReadDir("../../examples/repo/types")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range types {
		b, err := os.ReadFile(filepath.Join("../../examples/repo/types", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "type-"+e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	generated := strings.Replace(string(data), "metadata:\n", "metadata:\n  uid: 0f1e2d3c\n  resourceVersion: \"12\"\n", 1)
	if generated == string(data) {
		t.Fatal("no metadata in the example")
	}
	if err := os.WriteFile(filepath.Join(dir, "network.yaml"), []byte(generated), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "validate", dir)
	want := "warning: " + filepath.ToSlash(filepath.Join(dir, "network.yaml")) + ":"
	if code != 0 || out != "" || strings.Count(errOut, "warning: ") != 1 || !strings.Contains(errOut, want) ||
		!strings.Contains(errOut, "metadata.uid, metadata.resourceVersion ignored") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
