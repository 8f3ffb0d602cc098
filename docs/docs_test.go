// Package docs_test checks the documentation against the code: every
// configuration key is in the reference and no key there is stale, every
// configuration example loads, every manifest example validates (or, marked
// invalid, is refused), and every relative link and anchor resolves.
// docs/README.md, "Writing these pages", states the conventions it relies on.
package docs_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/builtin"
	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/manifest"
)

// root is the repository root, found from this package's folder before any
// test changes the working directory.
var root = func() string {
	abs, err := filepath.Abs("..")
	if err != nil {
		panic(err)
	}
	return abs
}()

// pages lists README.md and every Markdown file under docs/, as paths
// relative to the repository root.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 {
		t.Fatalf("found only %d pages: %q", len(out), out)
	}
	return out
}

func read(t *testing.T, page string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// block is one fenced code block of a page.
type block struct {
	page string
	line int    // the line of the opening fence, one-based
	lang string // the fence's info string
	text string
	// marker is the HTML comment on the line before the fence, without
	// "<!--" and "-->", or "".
	marker string
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.page, b.line) }

var markerRE = regexp.MustCompile(`^<!--\s*(.*?)\s*-->$`)

// blocks returns the fenced code blocks of a page.
func blocks(page, text string) []block {
	var (
		out    []block
		cur    *block
		body   []string
		prev   string
		indent string
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur == nil {
			if strings.HasPrefix(trimmed, "```") {
				cur = &block{page: page, line: n, lang: strings.TrimPrefix(trimmed, "```")}
				indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
				if m := markerRE.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
					cur.marker = m[1]
				}
				body = nil
				continue
			}
			if trimmed != "" {
				prev = line
			}
			continue
		}
		if trimmed == "```" {
			cur.text = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur, prev = nil, ""
			continue
		}
		body = append(body, strings.TrimPrefix(line, indent))
	}
	return out
}

// What a YAML example is.
const (
	kindConfig   = "configuration"
	kindManifest = "manifest"
	kindOther    = "other"
)

// classify says what a yaml block is: a manifest when a document has
// apiVersion and kind at the top, a configuration when every top-level key
// is one of the configuration's, and other (which must be marked "not
// checked") otherwise.
func classify(b block) string {
	docs := splitDocuments(b.text)
	for _, d := range docs {
		var m map[string]any
		if yaml.Unmarshal([]byte(d), &m) == nil && m["apiVersion"] != nil && m["kind"] != nil {
			return kindManifest
		}
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(b.text), &m); err != nil || len(m) == 0 {
		return kindOther
	}
	top := configTopKeys()
	for k := range m {
		if !slices.Contains(top, k) {
			return kindOther
		}
	}
	return kindConfig
}

func splitDocuments(text string) []string {
	return regexp.MustCompile(`(?m)^---\s*$`).Split(text, -1)
}

func configTopKeys() []string {
	var out []string
	t := reflect.TypeFor[config.Config]()
	for i := range t.NumField() {
		if name := jsonName(t.Field(i)); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// yamlBlocks returns every yaml block of every page, with its kind.
func yamlBlocks(t *testing.T) map[string][]block {
	t.Helper()
	out := map[string][]block{}
	for _, p := range pages(t) {
		for _, b := range blocks(p, read(t, p)) {
			if b.lang == "yaml" || b.lang == "yml" {
				k := classify(b)
				out[k] = append(out[k], b)
			}
		}
	}
	return out
}

// invalid returns the text a refusal must contain when the block is marked
// "invalid: TEXT", and whether it is.
func (b block) invalid() (string, bool) {
	return strings.CutPrefix(b.marker, "invalid: ")
}

func (b block) notChecked() bool { return strings.HasPrefix(b.marker, "not checked: ") }

// TestYAMLExamplesAreClassified: every yaml example is a configuration or
// a manifest, which the tests below check, or says why it is not checked.
func TestYAMLExamplesAreClassified(t *testing.T) {
	all := yamlBlocks(t)
	if len(all[kindConfig]) < 10 || len(all[kindManifest]) < 3 {
		t.Errorf("found %d configuration and %d manifest examples: the classification is broken", len(all[kindConfig]), len(all[kindManifest]))
	}
	for _, b := range all[kindOther] {
		if !b.notChecked() {
			t.Errorf("%s: a yaml block that is neither a configuration (top-level keys %s) nor a manifest (apiVersion, kind): "+
				"make it one, or mark it <!-- not checked: why -->", b, strings.Join(configTopKeys(), ", "))
		}
	}
	for _, k := range []string{kindConfig, kindManifest} {
		for _, b := range all[k] {
			if b.notChecked() {
				t.Errorf("%s: a %s example marked not checked: it is checked anyway; drop the marker", b, k)
			}
		}
	}
}

// keyPaths walks a configuration type by its json tags: struct fields are
// .name, list items [], map values .<name>. Types that decode themselves
// (durations, sizes, the action settings) are leaves.
func keyPaths(prefix string, t reflect.Type, out map[string]bool) {
	unmarshaler := reflect.TypeFor[json.Unmarshaler]()
	if reflect.PointerTo(t).Implements(unmarshaler) || t.Implements(unmarshaler) {
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		keyPaths(prefix, t.Elem(), out)
	case reflect.Slice:
		keyPaths(prefix+"[]", t.Elem(), out)
	case reflect.Map:
		// A mapping of names to settings has keys of its own; one of
		// strings (labels) is a value.
		if t.Elem().Kind() == reflect.Struct {
			out[prefix+".<name>"] = true
			keyPaths(prefix+".<name>", t.Elem(), out)
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			name := jsonName(f)
			if name == "" {
				continue
			}
			p := name
			if prefix != "" {
				p = prefix + "." + name
			}
			out[p] = true
			keyPaths(p, f.Type, out)
		}
	}
}

func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return name
}

// referenceRowRE is a row of a table whose first cell is one code span:
// the key it documents.
var referenceRowRE = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")

// TestConfigurationReferenceCoversEveryKey: every key of the configuration
// has a row in docs/configuration.md, and every row names a key that
// exists.
func TestConfigurationReferenceCoversEveryKey(t *testing.T) {
	keys := map[string]bool{}
	keyPaths("", reflect.TypeFor[config.Config](), keys)
	if len(keys) < 50 {
		t.Fatalf("walked only %d keys: %v", len(keys), keys)
	}
	documented := map[string]int{}
	for n, line := range strings.Split(read(t, "docs/configuration.md"), "\n") {
		if m := referenceRowRE.FindStringSubmatch(line); m != nil {
			if _, dup := documented[m[1]]; dup {
				t.Errorf("docs/configuration.md:%d: %s has a second row", n+1, m[1])
			}
			documented[m[1]] = n + 1
		}
	}
	for _, k := range slices.Sorted(mapsKeys(keys)) {
		if _, ok := documented[k]; !ok {
			t.Errorf("configuration key %s has no row in docs/configuration.md", k)
		}
	}
	for _, k := range slices.Sorted(mapsKeys(documented)) {
		if !keys[k] {
			t.Errorf("docs/configuration.md:%d documents %s, which the configuration does not have", documented[k], k)
		}
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// dummyEnv sets every variable a configuration names, to a value long
// enough to be masked. A signing key must parse: those get one, whsec_ and
// the base64 of 32 bytes.
func dummyEnv(name string) (string, bool) {
	if strings.HasSuffix(name, "SIGNING_KEY") {
		return "whsec_" + base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%-32.32s", "dummy-key-of-"+name))), true
	}
	return "dummy-value-of-" + name, true
}

// TestConfigurationExamplesLoad loads every configuration example with the
// agent's own parser, and decodes each action instance's settings with its
// plugin: a misspelt setting fails. An example marked invalid must be
// refused, saying what the marker says.
func TestConfigurationExamplesLoad(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	reg := builtin.Registry()
	for _, b := range yamlBlocks(t)[kindConfig] {
		// Key files named by signature policies must exist: give them one.
		var doc struct {
			Sources []struct {
				Git *struct {
					Verify map[string]any `json:"verify"`
				} `json:"git"`
			} `json:"sources"`
		}
		_ = yaml.Unmarshal([]byte(b.text), &doc)
		for _, s := range doc.Sources {
			if s.Git == nil {
				continue
			}
			for _, k := range []string{"openpgpKeysFile", "sshAllowedSignersFile"} {
				if p, ok := s.Git.Verify[k].(string); ok && p != "" && !filepath.IsAbs(p) {
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		cfg, err := config.Parse([]byte(b.text), dummyEnv)
		var actionErrs []string
		if err == nil {
			for _, name := range slices.Sorted(mapsKeys(cfg.Actions)) {
				a := cfg.Actions[name]
				_, berr := reg.Build(map[string]action.Spec{name: {Plugin: a.Plugin, Config: a.Config}}, dummyEnv, nil)
				// Only the settings are checked here: the commands, binaries
				// and folders the examples name are not on this machine.
				if berr != nil && (strings.Contains(berr.Error(), "unknown setting") || strings.Contains(berr.Error(), "must be") ||
					errors.Is(berr, action.ErrUnknownPlugin)) {
					actionErrs = append(actionErrs, berr.Error())
				}
			}
		}
		want, invalid := b.invalid()
		switch {
		case invalid && err == nil && len(actionErrs) == 0:
			t.Errorf("%s: marked invalid (%q) but loads", b, want)
		case invalid && err != nil && !strings.Contains(err.Error(), want):
			t.Errorf("%s: refused, but not with %q: %v", b, want, err)
		case invalid && err == nil && !strings.Contains(strings.Join(actionErrs, "\n"), want):
			t.Errorf("%s: refused, but not with %q: %v", b, want, actionErrs)
		case !invalid && err != nil:
			t.Errorf("%s: the configuration example does not load:\n%v\n%s", b, err, b.text)
		case !invalid && len(actionErrs) > 0:
			t.Errorf("%s: an action's settings are refused:\n%s", b, strings.Join(actionErrs, "\n"))
		}
	}
}

// exampleTypes are the resource types of examples/: what a manifest example
// refers to when its page declares no type of that kind.
func exampleTypes(t *testing.T) map[string]*manifest.ResourceType {
	t.Helper()
	out := map[string]*manifest.ResourceType{}
	for _, dir := range []string{"examples/repo/types", "examples/terraform/repo/types"} {
		docs, err := manifest.LoadDir(filepath.Join(root, dir), manifest.LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		set, err := manifest.Validate(docs, nil)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, rt := range set.Types {
			out[rt.Name] = rt
		}
	}
	if len(out) < 3 {
		t.Fatalf("found %d example types", len(out))
	}
	return out
}

func file(name, text string) manifest.File {
	sum := sha256.Sum256([]byte(text))
	return manifest.File{Path: name, Data: []byte(text), Hash: "sha256:" + hex.EncodeToString(sum[:])}
}

// isType says whether a manifest block declares resource types.
func isType(b block) bool {
	for _, d := range splitDocuments(b.text) {
		var m struct{ Kind string }
		if yaml.Unmarshal([]byte(d), &m) == nil && (m.Kind == "ResourceType" || m.Kind == "CustomResourceDefinition") {
			return true
		}
	}
	return false
}

// TestManifestExamplesValidate validates every manifest example with the
// agent's validator, against the types its page declares and then those
// of examples/. An example marked invalid must be refused, saying what the
// marker says.
func TestManifestExamplesValidate(t *testing.T) {
	known := exampleTypes(t)
	byPage := map[string][]block{}
	for _, b := range yamlBlocks(t)[kindManifest] {
		byPage[b.page] = append(byPage[b.page], b)
	}
	for _, page := range slices.Sorted(mapsKeys(byPage)) {
		var types []manifest.File
		for _, b := range byPage[page] {
			if _, invalid := b.invalid(); isType(b) && !invalid {
				types = append(types, file(fmt.Sprintf("type-%d.yaml", b.line), b.text))
			}
		}
		for _, b := range byPage[page] {
			files := []manifest.File{}
			name := fmt.Sprintf("type-%d.yaml", b.line)
			if !slices.ContainsFunc(types, func(f manifest.File) bool { return f.Path == name }) {
				files = append(files, file(fmt.Sprintf("example-%d.yaml", b.line), b.text))
			}
			files = append(files, types...)
			v := manifest.Validator{}
			set, err := v.ValidateFiles(files, func(kind string) *manifest.ResourceType { return known[kind] })
			want, invalid := b.invalid()
			switch {
			case invalid && err == nil:
				t.Errorf("%s: marked invalid (%q) but validates", b, want)
			case invalid && !strings.Contains(err.Error()+problemsOf(err), want):
				t.Errorf("%s: refused, but not with %q:\n%s", b, want, problemsOf(err))
			case !invalid && err != nil:
				t.Errorf("%s: the manifest example does not validate:\n%s%s", b, problemsOf(err), b.text)
			case !invalid && len(set.Types)+len(set.Resources) == 0:
				t.Errorf("%s: validates to nothing", b)
			}
		}
	}
}

func problemsOf(err error) string {
	var verr *manifest.ValidationError
	if !errors.As(err, &verr) {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	var buf bytes.Buffer
	for _, p := range verr.Problems {
		fmt.Fprintln(&buf, p.String())
	}
	return buf.String()
}
