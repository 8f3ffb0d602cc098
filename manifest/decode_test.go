package manifest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeFileDocuments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		data      string
		wantIndex []int
		wantLine  []int
	}{
		{"empty file", "", nil, nil},
		{"only comments", "# nothing here\n# at all\n", nil, nil},
		{"empty documents", "---\n---\n# c\n---\n~\n---\nnull\n", nil, nil},
		{"one document", "a: 1\n", []int{0}, []int{1}},
		{
			name:      "empty documents keep their index",
			data:      "# first\na: 1\n---\n---\n\nb: 2\n---\nc: 3\n",
			wantIndex: []int{0, 2, 3},
			wantLine:  []int{2, 6, 8},
		},
		{"json", "{\n  \"a\": 1\n}\n", []int{0}, []int{1}},
		{"utf-8 byte order mark", "\xef\xbb\xbfa: 1\n", []int{0}, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			docs, ps := DecodeFile("f.yaml", []byte(tt.data), DecodeOptions{})
			if len(ps) > 0 {
				t.Fatalf("problems: %v", ps)
			}
			var idx, lines []int
			for _, d := range docs {
				idx = append(idx, d.Index)
				lines = append(lines, d.Line)
				if d.File != "f.yaml" {
					t.Errorf("File = %q", d.File)
				}
			}
			if !reflect.DeepEqual(idx, tt.wantIndex) || !reflect.DeepEqual(lines, tt.wantLine) {
				t.Errorf("indexes %v lines %v, want %v %v", idx, lines, tt.wantIndex, tt.wantLine)
			}
		})
	}
}

func TestDecodeFileProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		data     string
		wantLine int
		wantMsg  string
	}{
		{"syntax error", "a: 1\nb:\n  c: 1\n   d: 2\n", 4, "invalid YAML"},
		{"syntax error in a later document", "a: 1\n---\nb: [1, 2\n", 3, "invalid YAML"},
		{"duplicate key", "a: 1\nb:\n  x: 1\n  x: 2\n", 4, `b.x: duplicate key "x"`},
		{"top-level list", "- a\n- b\n", 1, "document must be a mapping"},
		{"top-level scalar", "hello\n", 1, "document must be a mapping"},
		{"infinity", "a:\n  b: .inf\n", 2, "a.b: +Inf cannot be represented in JSON"},
		{"not a number", "a: .nan\n", 1, "cannot be represented in JSON"},
		{"non-utf-8", "a: 1\nb: caf\xe9\n", 2, "not valid UTF-8"},
		{"utf-16", "\xff\xfea\x00:\x00", 1, "not valid UTF-8"},
		{"custom tag", "a: !secret xyz\n", 1, "unsupported YAML tag !secret"},
		{"unknown alias", "a: 1\nb: *nope\n", 2, "invalid YAML: unknown anchor"},
		{"unclosed mapping", "a: 1\nb: {c: 1\n", 2, "invalid YAML"},
		{"tab indentation", "a:\n\tb: 1\n", 2, "invalid YAML"},
		{"collection as key", "? [a, b]\n: 1\n", 1, "mapping keys must be strings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ps := DecodeFile("f.yaml", []byte(tt.data), DecodeOptions{})
			if len(ps) != 1 {
				t.Fatalf("want one problem, got %v", ps)
			}
			p := ps[0]
			if p.File != "f.yaml" || p.Line != tt.wantLine || !strings.Contains(p.Message, tt.wantMsg) {
				t.Errorf("got %+v, want line %d and %q", p, tt.wantLine, tt.wantMsg)
			}
		})
	}
}

func TestDecodeFileValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		want string // canonical JSON of the document
	}{
		{"scalars", "s: hi\nb: true\nn: null\ni: 42\nf: 1.5\nq: \"42\"", `{"b":true,"f":1.5,"i":42,"n":null,"q":"42","s":"hi"}`},
		{"integral floats are integers", "a: 1.0\nb: 1e3\nc: -0.0", `{"a":1,"b":1000,"c":0}`},
		{"yaml integer forms", "h: 0x1F\no: 0o17\nu: 1_000", `{"h":31,"o":15,"u":1000}`},
		{"large integers", "a: 12345678901234567890", `{"a":12345678901234567890}`},
		{"timestamps stay as written", "t: 2024-01-15\n", `{"t":"2024-01-15"}`},
		{"numeric keys become strings", "1: a\ntrue: b", `{"1":"a","true":"b"}`},
		{"aliases expand", "x: &x {a: 1}\ny: *x\n", `{"x":{"a":1},"y":{"a":1}}`},
		{"merge keys", "base: &b {a: 1, b: 2}\nz:\n  <<: *b\n  b: 3\n", `{"base":{"a":1,"b":2},"z":{"a":1,"b":3}}`},
		{"merge list", "p: &p {a: 1}\nq: &q {a: 2, c: 3}\nz:\n  <<: [*p, *q]\n", `{"p":{"a":1},"q":{"a":2,"c":3},"z":{"a":1,"c":3}}`},
		{"html is not escaped", "a: \"<b>&</b>\"", `{"a":"<b>&</b>"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			docs, ps := DecodeFile("f.yaml", []byte(tt.data), DecodeOptions{})
			if len(ps) > 0 || len(docs) != 1 {
				t.Fatalf("docs %d, problems %v", len(docs), ps)
			}
			got, err := CanonicalJSON(docs[0].Object)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

const aliasBomb = `a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

func TestDecodeFileRejectsAliasBomb(t *testing.T) {
	t.Parallel()
	_, ps := DecodeFile("bomb.yaml", []byte(aliasBomb), DecodeOptions{})
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "alias") {
		t.Fatalf("want one alias problem, got %v", ps)
	}
}

func TestConverterStopsWithinBudget(t *testing.T) {
	t.Parallel()
	// The rejection is cheap because conversion stops once the budget is
	// spent: it visits at most budget values, not the billions the aliases
	// describe. (The time it takes is measured in BenchmarkDecodeAliasBomb.)
	docs, ps := DecodeFile("bomb.yaml", []byte(aliasBomb), DecodeOptions{})
	if len(docs) != 0 || len(ps) != 1 {
		t.Fatalf("docs %d problems %v", len(docs), ps)
	}
	// A generous expansion lets moderate aliasing through.
	moderate := "x: &x [1, 2, 3]\ny: [*x, *x, *x, *x]\n"
	if _, ps := DecodeFile("ok.yaml", []byte(moderate), DecodeOptions{}); len(ps) != 0 {
		t.Fatalf("moderate aliasing refused: %v", ps)
	}
	// And a tight one refuses it.
	if _, ps := DecodeFile("ok.yaml", []byte(`x: &x [[1,2,3,4,5,6,7,8,9,10],[1,2,3,4,5,6,7,8,9,10]]
y: [*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x,*x]
z: [*y,*y,*y]
`), DecodeOptions{AliasExpansion: 1}); len(ps) != 1 {
		t.Fatalf("tight expansion let it through: %v", ps)
	}
}

func TestDocumentLineOf(t *testing.T) {
	t.Parallel()
	data := "apiVersion: v1\nkind: K\nmetadata:\n  name: n\nspec:\n  list:\n    - a: 1\n    - b:\n        deep: 2\n  \"we/ird\": 3\n"
	docs, ps := DecodeFile("f.yaml", []byte(data), DecodeOptions{})
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	d := docs[0]
	for ptr, want := range map[string]int{
		"":                    1,
		"/kind":               2,
		"/metadata/name":      4,
		"/spec/list/1/b":      8,
		"/spec/list/1/b/dd":   8, // missing field: its parent's line
		"/spec/list/1/b/deep": 9,
		"/spec/we~1ird":       10,
		"/spec/list/7":        6,
	} {
		if got := d.LineOf(ptr); got != want {
			t.Errorf("LineOf(%q) = %d, want %d", ptr, got, want)
		}
	}
}

func TestCanonicalizeJSON(t *testing.T) {
	t.Parallel()
	a, err := CanonicalizeJSON([]byte(`{ "b": [1.0, 2e0, {"y": 1, "x": 2}], "a": "\u003c" }`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":"<","b":[1,2,{"x":2,"y":1}]}`; string(a) != want {
		t.Errorf("got %s, want %s", a, want)
	}
	if _, err := CanonicalizeJSON([]byte(`{"a": 1e400}`)); err == nil {
		t.Error("out-of-range number accepted")
	}
	var v any
	if err := json.Unmarshal(a, &v); err != nil {
		t.Errorf("canonical JSON does not parse: %v", err)
	}
}
