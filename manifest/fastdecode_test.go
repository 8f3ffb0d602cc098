package manifest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// checkFastDecode fails t when fastDecode accepts data but decodes it
// otherwise than yaml.v3 does, and reports whether it accepted it.
func checkFastDecode(t *testing.T, data []byte) bool {
	t.Helper()
	fast, ok := fastDecode("f.yaml", data)
	if !ok {
		return false
	}
	slow, ps := decodeYAML("f.yaml", data, DecodeOptions{AliasExpansion: DefaultAliasExpansion, MaxExpandedSize: DefaultMaxFileSize})
	if len(ps) > 0 {
		t.Errorf("fastDecode accepted %q, which yaml.v3 refuses: %v", data, ps)
		return true
	}
	if len(fast) != len(slow) {
		t.Errorf("fastDecode(%q) gave %d documents, yaml.v3 %d", data, len(fast), len(slow))
		return true
	}
	for i := range fast {
		f, s := fast[i], slow[i]
		if f.Index != s.Index || f.Line != s.Line || !reflect.DeepEqual(f.Object, s.Object) {
			t.Errorf("fastDecode(%q) document %d:\n got index %d line %d %#v\nwant index %d line %d %#v",
				data, i, f.Index, f.Line, f.Object, s.Index, s.Line, s.Object)
		}
		// Lines of fields come from yaml.v3 either way.
		for _, ptr := range []string{"", "/metadata/name", "/spec/a/0", "/nope"} {
			if fl, sl := f.LineOf(ptr), s.LineOf(ptr); fl != sl {
				t.Errorf("fastDecode(%q) document %d: LineOf(%q) = %d, want %d", data, i, ptr, fl, sl)
			}
		}
	}
	return true
}

func TestFastDecodeAgreesWithYAML(t *testing.T) {
	t.Parallel()
	// Each must be decoded by the fast path, to the same as yaml.v3.
	fast := []string{
		"",
		"a: 1\n",
		"a: 1",
		"---\na: 1\n",
		"a: 1\n---\nb: 2\n",
		"---\n---\na: 1\n",
		"a: 1\n---\n",
		"# head\n---\na: 1\n---\n# only a comment\n---\nb: 2\n",
		"\n\n  a: 1\n  b: two\n",
		"apiVersion: v1\nkind: K\nmetadata:\n  name: x\n  labels: {a: b, c: \"d\"}\nspec:\n  list:\n  - 1\n  - two\n  -\n  - {x: y}\n  nested:\n    - a: 1\n      b: [1, 2, {c: d}]\n    -   e: f\n        g: h\n",
		"a: yes\nb: no\nc: on\nd: off\ne: ~\nf: null\ng: Null\nh:\ni: true\nj: False\nk: 0x1F\nl: 0o17\nm: 017\nn: 1_000\no: 1.5\np: 1e3\nr: -.5\ns: +3\nt: 2001-12-14\nu: 12:30\nv: 123456789012345678901234567890\nw: 1.0\nx: -0\n",
		"a: 'it''s'\nb: \"q\\\"uote \\\\ \\n\\t\"\nc: ''\nd: \"\"\n'e f': 1\n\"g\": 2\n",
		"a: b # comment\nc: d#not-comment\n# whole line\ne:   spaced   \nf: 'x' # c\n",
		"url: http://example.com:8080/x\npath: /a/b\nneg: -1\ndash: -x\nq: a?b\n",
		"{\"apiVersion\": \"v1\", \"kind\": \"K\",\n  \"metadata\": {\"name\": \"x\"},\n  \"spec\": {\"n\": 1.5, \"l\": [1, -2, \"3\", true, null, []],\n  \"m\": {}}\n}\n",
		"{\"a\":1,\"b\":[\"x\",\"y\"],\"c\":{\"d\":false}}",
		"a:\n- x\n- y\nb: 1\n",
		"- a: 1\n",
		"k: [a, b c, 'd', \"e\"]\nm: {a: 1, b: [2]}\n",
		"emoji: 🙂\nümlaut: é\n",
		"a: TRUE\nb: NULL\nc: Yes\nd: o\ne: 0\nf: -0\ng: 007\nh: 12345678901234567890\ni: 123456789012345678\nj: -123456789012345678\nk: 0.0\nl: +0\nm: <x\nn: .5\no: -\\x\np: 1_0\nq: 0b11\nr: True\ns: nULL\n",
	}
	for _, s := range fast {
		if !checkFastDecode(t, []byte(s)) && s != "- a: 1\n" {
			t.Errorf("fastDecode gave up on %q", s)
		}
	}
	// Each is left to yaml.v3 (fastDecode may only give up).
	slow := []string{
		"- a: 1\n",
		"a: &x 1\nb: *x\n",
		"a: !!str 1\n",
		"a: |\n  text\n",
		"a: >\n  text\n",
		"a: multi\n  line\n",
		"a: 1\na: 2\n",
		"<<: {a: 1}\n",
		"a:\tb\n",
		"a: 1\r\nb: 2\r\n",
		"%YAML 1.2\n---\na: 1\n",
		"a: 1\n...\n",
		"--- {a: 1}\n",
		"? a\n: b\n",
		"a: b: c\n",
		"a: [1,\n  2]\n",
		"a: \"multi\n  line\"\n",
		"a: \"\\u00e9\"\n",
		"a:\n  b: 1\n c: 2\n",
		"a: 1\n  b: 2\n",
		"[1, 2]\n",
		"just text\n",
		"a: @x\n",
		"a: `x`\n",
		"{a: 1, a: 2}\n",
		"{a}\n",
		"a: {b: }\n",
		"a: 'x' y\n",
		"a: \x01\n",
		"a: \u2028\n",
		"a: \ufeffx\n",
		strings.Repeat("[", 200) + strings.Repeat("]", 200) + "\n",
		strings.Repeat("k", 1100) + ": 1\n",
	}
	for _, s := range slow {
		checkFastDecode(t, []byte(s))
	}
	// The benchmark's files are all fast.
	for n := range 20 {
		if doc := benchResourceDoc(n); !checkFastDecode(t, []byte(doc)) {
			t.Errorf("fastDecode gave up on benchmark file %d:\n%s", n, doc)
		}
	}
	if !checkFastDecode(t, []byte(benchTypeDoc(1))) {
		t.Error("fastDecode gave up on the benchmark type")
	}
	// Every prefix of a realistic file: cut anywhere, it must still agree.
	doc := benchResourceDoc(3) + "---\n" + benchResourceDoc(9) + "---\n" + benchTypeDoc(2)
	for i := range len(doc) {
		checkFastDecode(t, []byte(doc[:i]))
	}
	for _, variant := range []string{"  ", " #x", ":", " - z", "\n  x"} {
		for i := 0; i < len(doc); i++ {
			if doc[i] == '\n' {
				checkFastDecode(t, []byte(fmt.Sprint(doc[:i], variant, doc[i:])))
			}
		}
	}
}
