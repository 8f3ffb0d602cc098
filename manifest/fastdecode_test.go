package manifest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkFastDecode fails t when fastDecode accepts data but decodes it
// otherwise than yaml.v3 does, and reports whether it accepted it. The
// documents must agree in index, line, value and the line of every field.
func checkFastDecode(t *testing.T, data []byte) bool {
	t.Helper()
	fast, ok := fastDecode("f.yaml", data)
	if !ok {
		return false
	}
	slow, ps := decodeYAML("f.yaml", data, DecodeOptions{AliasExpansion: DefaultAliasExpansion, MaxExpandedSize: DefaultMaxFileSize})
	if len(ps) > 0 {
		t.Errorf("fastDecode accepted %s, which yaml.v3 refuses: %v", shortQuote(data), ps)
		return true
	}
	if len(fast) != len(slow) {
		t.Errorf("fastDecode(%s) gave %d documents, yaml.v3 %d", shortQuote(data), len(fast), len(slow))
		return true
	}
	for i := range fast {
		f, s := fast[i], slow[i]
		if f.File != s.File || f.Index != s.Index || f.Line != s.Line || !reflect.DeepEqual(f.Object, s.Object) {
			t.Errorf("fastDecode(%s) document %d:\n got index %d line %d %.500v\nwant index %d line %d %.500v",
				shortQuote(data), i, f.Index, f.Line, f.Object, s.Index, s.Line, s.Object)
			continue
		}
		// Lines of fields come from yaml.v3 either way; a missing field
		// points at its parent.
		pointers := append(fieldPointers(nil, "", s.Object), "", "/nope", "/metadata/name/x")
		for _, ptr := range pointers {
			if fl, sl := f.LineOf(ptr), s.LineOf(ptr); fl != sl {
				t.Errorf("fastDecode(%s) document %d: LineOf(%q) = %d, want %d", shortQuote(data), i, ptr, fl, sl)
			}
		}
	}
	return true
}

// fieldPointers appends the JSON pointers of v's fields and items, at most
// a few hundred of them.
func fieldPointers(out []string, prefix string, v any) []string {
	if len(out) > 300 {
		return out
	}
	switch v := v.(type) {
	case map[string]any:
		for k, item := range v {
			ptr := prefix + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
			out = fieldPointers(append(out, ptr), ptr, item)
		}
	case []any:
		for i, item := range v {
			ptr := fmt.Sprint(prefix, "/", i)
			out = fieldPointers(append(out, ptr), ptr, item)
		}
	}
	return out
}

// shortQuote quotes data for a message, cut short if long.
func shortQuote(data []byte) string {
	if len(data) > 200 {
		return fmt.Sprintf("%q...(%d bytes)", data[:200], len(data))
	}
	return fmt.Sprintf("%q", data)
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

// fastDecodeCases are inputs on which the fast path must decline or agree
// with yaml.v3: the corners of YAML where a hand-written reader goes wrong.
var fastDecodeCases = []struct {
	name string
	in   string
}{
	// YAML 1.1 versus 1.2 scalars.
	{"bool 1.1 words", "a: yes\nb: no\nc: on\nd: off\ne: y\nf: n\ng: Y\nh: N\ni: YES\nj: Off\n"},
	{"bool 1.2", "a: true\nb: True\nc: TRUE\nd: false\ne: False\nf: FALSE\ng: tRUE\n"},
	{"nulls", "a: ~\nb: null\nc: Null\nd: NULL\ne: nULL\nf:\ng: ''\n"},
	{"inf nan", "a: .inf\nb: -.Inf\nc: +.INF\nd: .NaN\ne: .nan\n"},
	{"inf nan flow", "a: [.inf]\n"},
	{"ints", "a: 0x1F\nb: 0o17\nc: 017\nd: 1_000\ne: +1\nf: -0\ng: 0\nh: 0b101\ni: 09\nj: -0x1F\nk: +0\nl: 00\n"},
	{"floats", "a: 1e3\nb: 1E3\nc: 0.0\nd: -0.0\ne: 1.\nf: .5\ng: -.5\nh: 1_0.5\ni: 6.8523015e+5\nj: 1e400\nk: 1e-400\n"},
	{"timestamps", "a: 2001-12-14\nb: 2001-12-14t21:59:43.10-05:00\nc: 2001-12-14 21:59:43.10 -5\nd: 2002-1-1\ne: 12:30\nf: 1:30:00\n"},
	{"equals and odd starts", "a: =\nb: <<\nc: <x\nd: .\ne: ..\nf: -\ng: +\nh: -.\n"},
	{"merge key value", "a: <<\n"},
	{"big ints", "a: 123456789012345678901234567890\nb: -9223372036854775808\nc: 9223372036854775808\nd: 999999999999999999\ne: 1000000000000000000\nf: 0x7fffffffffffffffff\n"},
	{"big int flow", "{\"a\": 123456789012345678901234567890, \"b\": -99999999999999999999}"},
	{"huge exponent", "a: 1e29\nb: 12345678901234567890.0\nc: 1" + strings.Repeat("0", 400) + "\n"},
	{"version strings", "a: 1.10\nb: 1.2.3\nc: 010\nd: 1_2_3\ne: 0.1_0\n"},
	// Quoted scalars.
	{"double escapes", "a: \"\\u00e9\"\nb: \"\\x41\"\nc: \"\\N\"\nd: \"\\_\"\ne: \"\\L\"\nf: \"\\P\"\ng: \"\\U0001F600\"\n"},
	{"double common escapes", "a: \"q\\\"uote \\\\ \\n\\t\\r\\b\\f\"\nb: \"\\/\"\nc: \"\\0\"\nd: \"\\a\\e\\v\"\ne: \"\\ \"\n"},
	{"double bad escape", "a: \"\\q\"\n"},
	{"double line continuation", "a: \"one \\\n  two\"\n"},
	{"double multi-line", "a: \"one\n  two\n\n  three\"\n"},
	{"single quotes", "a: 'it''s'\nb: ''''\nc: ''\nd: '\\n'\ne: '# not a comment'\nf: 'a: b'\n"},
	{"single multi-line", "a: 'one\n  two'\n"},
	{"quoted then text", "a: 'x' y\nb: 1\n"},
	{"quoted then colon", "a: \"x\":\n"},
	{"quoted key forms", "\"a\": 1\n'b': 2\n\"c d\": 3\n'e''f': 4\n\"\": 5\n"},
	{"quoted key no space", "\"a\":1\n"},
	{"quoted key space colon", "\"a\" : 1\n"},
	{"quoted with hash", "a: \"x # y\"\nb: 'x #y' # z\n"},
	{"unterminated", "a: \"x\nb: 1\n"},
	// Multi-line plain scalars.
	{"plain multi-line", "a: one\n  two\nb: 1\n"},
	{"plain multi-line blank", "a: one\n\n  two\n"},
	{"plain continued in seq", "a:\n- one\n  two\n"},
	{"plain key multi-line", "a\nb: 1\n"},
	// Block scalars.
	{"literal", "a: |\n  x\n  y\n"},
	{"folded", "a: >\n  x\n  y\n"},
	{"literal strip", "a: |-\n  x\n\n\n"},
	{"folded keep", "a: >+\n  x\n\n\nb: 1\n"},
	{"indent indicator", "a: |2\n    x\n   y\n"},
	{"indent indicator keep", "a: |2+\n   x\n\n"},
	{"block in seq", "a:\n- |\n  x\n- y\n"},
	{"block with document marker text", "a: |\n  ---\n  b\n"},
	// Comments.
	{"comments everywhere", "# c\na: 1 # c\n# c\nb: # c\n  # c\n  c: 2 # c\n  # c\nd:\n# c\n- 1 # c\n# c\n- 2\n# c\n"},
	{"hash in values", "a: a#b\nb: x #y\nc: 'a#b'\nd: \"#\"\ne: #\nf: ##\n"},
	{"hash in key", "a#b: 1\n"},
	{"hash key after space", "a #b: 1\n"},
	{"comment without space in flow", "a: [1,#c\n]\n"},
	{"comment after flow", "a: [1] # c\nb: {x: y}# c\n"},
	{"comment only file", "# one\n# two\n"},
	{"comment only documents", "# a\n---\n# b\n---\n# c\n"},
	{"indented comment", "a:\n    # deep\n  b: 1\n"},
	// Flow collections.
	{"flow nested", "a: {b: 1, c: [x, y, {d: [e]}]}\n"},
	{"flow trailing commas", "a: [1, 2,]\nb: {c: 1,}\n"},
	{"flow empty entries", "a: [1,,2]\n"},
	{"flow only comma", "a: [,]\n"},
	{"flow multi-line block", "a: [1,\n  2]\n"},
	{"flow multi-line document", "{a: 1,\n b: [x,\n  y],\n c: {d: e}\n}\n"},
	{"flow document column zero", "{a: 1,\nb: 2}\n"},
	{"flow document indented", "  {a: 1,\n b: 2}\n"},
	{"flow plain multi-line", "{a: b\n c}\n"},
	{"flow plain colon", "a: {b: c:d}\n"},
	{"flow url", "a: [http://x]\n"},
	{"flow key adjacent colon", "{\"a\":b}\n"},
	{"flow plain key adjacent colon", "{a:b}\n"},
	{"flow single pair", "a: [b: c]\n"},
	{"flow explicit key", "a: {? b: c}\n"},
	{"flow empty value", "a: {b: }\nc: {d: ,}\n"},
	{"flow key only", "a: {b}\n"},
	{"flow dash entries", "a: [-1, -x, -]\n"},
	{"flow dash space", "a: [- x]\n"},
	{"flow dash at line end", "{0: -\n}\n"},
	{"flow quoted key line break", "{\"a\"\n: 1}\n"},
	{"flow spaces before colon", "a: {b : 1}\n"},
	{"flow key with spaces", "a: {b c: 1}\n"},
	{"flow unclosed", "a: [1, 2\n"},
	{"flow extra close", "a: [1]]\n"},
	{"flow quoted keys", "{'a': 1, \"b\": 2, c: 3}\n"},
	{"flow value then junk", "a: {b: 1}x\n"},
	{"flow in flow key", "a: {[b]: 1}\n"},
	{"flow document then block", "{a: 1}\nb: 2\n"},
	{"flow sequence document", "[1, 2]\n"},
	{"flow dup after unquote", "{a: 1, \"a\": 2}\n"},
	{"flow document comments", "{ # c\n  a: 1, # c\n  # c\n  b: 2 # c\n} # c\n# c\n"},
	{"flow document with marker", "{a: 1,\n---\n}\n"},
	{"flow document with dots", "{a: [1,\n...\n]}\n"},
	{"flow question", "a: [?x]\n"},
	{"flow dashes line", "{a: [\n  ---,\n  ...\n]}\n"},
	{"flow value on next line", "{\"a\":\n1, b:\n  2}\n"},
	{"dashes item", "a:\n- ---\n- ...\n- --- x\n"},
	{"flow question inside", "a: [0?]\nb: [a?b]\nc: {d?: 1}\n"},
	{"flow braces in plain block", "a: b]\nc: d}\ne: f,g\n"},
	// Tags.
	{"tag str", "a: !!str 1\n"},
	{"tag int", "a: !!int \"1\"\n"},
	{"tag custom", "a: !custom x\n"},
	{"tag binary", "a: !!binary aGVsbG8=\n"},
	{"tag set", "a: !!set {x, y}\n"},
	{"tag omap", "a: !!omap [x: 1]\n"},
	{"tag in flow", "{a: !!str 1}\n"},
	{"tag on document", "--- !!map\na: 1\n"},
	{"non-specific tag", "a: ! 1\n"},
	// Anchors, aliases, merge keys.
	{"anchor alias", "a: &x 1\nb: *x\n"},
	{"anchor on mapping", "a: &x\n  b: 1\nc: *x\n"},
	{"merge", "base: &b {x: 1}\nd:\n  <<: *b\n  y: 2\n"},
	{"merge plain key", "<<: {a: 1}\n"},
	{"merge flow key", "{<<: {a: 1}}\n"},
	{"merge quoted key", "\"<<\": 1\n'<<': 2\n"},
	{"ampersand in value", "a: b&c\nb: b*c\n"},
	// Duplicate and odd keys.
	{"duplicate", "a: 1\na: 2\n"},
	{"duplicate after unquoting", "a: 1\n\"a\": 2\n"},
	{"duplicate single quoted", "'a': 1\na: 2\n"},
	{"duplicate nested", "a:\n  b: 1\n  b: 2\n"},
	{"duplicate number spelling", "1: a\n01: b\n"},
	{"key trailing spaces", "a   : 1\nb: 2\n"},
	{"complex key", "? a\n: b\n"},
	{"complex key flow", "? [a]\n: b\n"},
	{"number and bool keys", "1: a\ntrue: b\n~: c\nnull: d\n1.5: e\n0x1F: f\nyes: g\n-1: h\n"},
	{"colon in key", "a:b: 1\n"},
	{"mapping value in value", "a: b: c\n"},
	{"dash keys", "-a: 1\n---: 2\n...: 3\n"},
	{"indented dashes key", "x:\n  ---: 1\n  ...: 2\n"},
	{"long key", strings.Repeat("k", 1100) + ": 1\n"},
	{"key just under limit", strings.Repeat("k", 1000) + ": 1\n"},
	{"key padded past limit", "a" + strings.Repeat(" ", 1100) + ": 1\n"},
	{"quoted key escapes past limit", "'" + strings.Repeat("''", 600) + "': 1\n"},
	{"quoted key past limit", "\"" + strings.Repeat("k", 1100) + "\": 1\n"},
	{"flow key padded past limit", "{a" + strings.Repeat(" ", 1100) + ": 1}\n"},
	{"flow quoted key past limit", "{'" + strings.Repeat("''", 600) + "': 1}\n"},
	{"multi-byte key", strings.Repeat("é", 600) + ": 1\n"},
	{"question in key", "a?b: 1\n?a: 2\n"},
	{"colon start key", ":a: 1\n"},
	// Empty values.
	{"empty values", "a:\nb: \"\"\nc: ''\nd:\n- \n-\n- ~\ne:\n"},
	{"empty last", "a:"},
	{"empty item with comment", "a:\n- # c\n- x\n"},
	// Indentation.
	{"sequence at parent indent", "a:\n- x\n- y\nb:\n- z\n"},
	{"sequence in compact mapping", "- a:\n  - x\n  b: 1\n"},
	{"compact mapping wide", "k:\n-   a: 1\n    b: 2\n-  c: 3\n"},
	{"compact mapping misaligned", "k:\n-   a: 1\n  b: 2\n"},
	{"compact key only", "k:\n- a:\n  b: 1\n"},
	{"under-indented", "a:\n  b: 1\n c: 2\n"},
	{"over-indented", "a: 1\n  b: 2\n"},
	{"indented document", "  a: 1\n  b: 2\n"},
	{"indented then less", "  a: 1\nb: 2\n"},
	{"nested sequence", "a:\n-\n  - x\n  - y\n- - z\n"},
	{"item then indented", "a:\n- x\n  - y\n"},
	{"mapping in item under dash", "a:\n-\n  b: 1\n  c: 2\n"},
	{"item mapping then less", "a:\n  -\n b: 1\n"},
	{"seq after mapping same indent", "a:\n  b: 1\n  - x\n"},
	{"dash without space", "a:\n  -x\n"},
	{"dash then hash", "a:\n-#x\n"},
	{"tab indentation", "a:\n\tb: 1\n"},
	{"tab separator", "a:\tb\n"},
	{"tab in value", "a: b\tc\n"},
	{"tab in quotes", "a: \"b\tc\"\n"},
	// Documents.
	{"marker with content", "--- {a: 1}\n"},
	{"marker with comment", "--- # c\na: 1\n"},
	{"marker padded", "---   \na: 1\n"},
	{"four dashes", "----\na: 1\n"},
	{"end marker", "a: 1\n...\n"},
	{"end marker then document", "a: 1\n...\n---\nb: 2\n"},
	{"yaml directive", "%YAML 1.2\n---\na: 1\n"},
	{"yaml 1.1 directive", "%YAML 1.1\n---\na: yes\n"},
	{"tag directive", "%TAG ! tag:example.com,2000:\n---\na: !x 1\n"},
	{"empty documents", "---\n---\na: 1\n---\n---\nb: 2\n---\n"},
	{"null document", "---\n~\n---\na: 1\n"},
	{"scalar document", "just text\n"},
	{"sequence document", "- a\n- b\n"},
	{"document then scalar", "a: 1\n---\nx\n"},
	// Bytes.
	{"bom", "\ufeffa: 1\n"},
	{"bom mid", "a: 1\n\ufeff---\nb: 2\n"},
	{"crlf", "a: 1\r\nb: 2\r\n"},
	{"cr", "a: 1\rb: 2\r"},
	{"nul", "a: \x00\n"},
	{"control", "a: \x01b\n"},
	{"del", "a: b\x7f\n"},
	{"c1 control", "a: b\u0085c\n"},
	{"nbsp", "a: b\u00a0c\n"},
	{"line separator", "a: b\u2028c\n"},
	{"paragraph separator", "a: b\u2029c\n"},
	{"invalid utf-8", "a: \xff\n"},
	{"truncated utf-8", "a: \xc3\n"},
	{"replacement character", "a: \ufffd\n"},
	{"noncharacter", "a: \uffff\n"},
	{"astral", "a: 🙂\n\"🙂\": [🙂]\n"},
	{"long line", "a: " + strings.Repeat("x", 200000) + "\n"},
	{"long flow line", "a: [" + strings.Repeat("1, ", 50000) + "1]\n"},
	// Nesting.
	{"deep flow", strings.Repeat("[", 200) + strings.Repeat("]", 200) + "\n"},
	{"deep flow map", "a: " + strings.Repeat("{a: ", 150) + "1" + strings.Repeat("}", 150) + "\n"},
	{"deep block", deepBlock(150)},
	{"deep block ok", deepBlock(50)},
	{"deep flow unclosed", "a: " + strings.Repeat("[", 10000) + "\n"},
	// JSON.
	{"json", "{\"apiVersion\": \"v1\", \"kind\": \"K\", \"metadata\": {\"name\": \"x\"}, \"spec\": {\"n\": 1.5, \"l\": [1, -2, \"3\", true, null, [], {}]}}"},
	{"json compact", "{\"a\":1,\"b\":[\"x\",\"y\"],\"c\":{\"d\":false},\"e\":-1.5e-3}"},
	{"json duplicate", "{\"a\": 1, \"a\": 2}\n"},
	{"json nested duplicate", "{\"a\": {\"b\": 1, \"b\": 2}}\n"},
	{"json unicode escape", "{\"a\": \"\\u00e9\\u0041\"}\n"},
	{"json surrogate pair", "{\"a\": \"\\ud83d\\ude00\"}\n"},
	{"json lone surrogate", "{\"a\": \"\\ud83d\"}\n"},
	{"json slash escape", "{\"a\": \"\\/\"}\n"},
	{"json numbers", "{\"a\": -0, \"b\": 0.0, \"c\": 1E3, \"d\": 1e-3, \"e\": 10.50}\n"},
	{"json literals case", "{\"a\": True, \"b\": NULL, \"c\": yes}\n"},
	{"json multi-line", "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": \"c\"\n}\n"},
	{"json trailing text", "{\"a\": 1} x\n"},
	{"json two", "{\"a\": 1}\n{\"b\": 2}\n"},
	{"json escaped quote key", "{\"a\\\"b\": 1}\n"},
	{"json array top", "[{\"a\": 1}]\n"},
}

// deepBlock is a block mapping nested depth levels deep.
func deepBlock(depth int) string {
	var b strings.Builder
	for i := range depth {
		b.WriteString(strings.Repeat(" ", i))
		b.WriteString("a:\n")
	}
	b.WriteString(strings.Repeat(" ", depth))
	b.WriteString("b: 1\n")
	return b.String()
}

func TestFastDecodeDifferential(t *testing.T) {
	t.Parallel()
	for _, tc := range fastDecodeCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data := []byte(tc.in)
			checkFastDecode(t, data)
			// Through DecodeFile, which strips a byte order mark first,
			// the problems (file, document, line, text) are yaml.v3's.
			if !utf8.Valid(data) {
				return
			}
			_, got := DecodeFile("f.yaml", data, DecodeOptions{})
			_, want := decodeYAML("f.yaml", bytes.TrimPrefix(data, []byte(utf8BOM)),
				DecodeOptions{AliasExpansion: DefaultAliasExpansion, MaxExpandedSize: max(DefaultMaxFileSize, int64(len(data)))})
			if !reflect.DeepEqual(got, want) {
				t.Errorf("DecodeFile(%s) problems:\n got %v\nwant %v", shortQuote(data), got, want)
			}
		})
	}
}

// TestFastDecodeGeneratedLines checks the fast path against yaml.v3 on
// files put together at random from lines a manifest could hold, at random
// indentations: the structures (nesting, compact mappings, sequences at
// their key's indentation, comments, flow values) a byte fuzzer is slow to
// find. The seed is fixed, so a failure repeats.
func TestFastDecodeGeneratedLines(t *testing.T) {
	t.Parallel()
	keys := []string{"a", "b", "'a'", "\"b\"", "1", "true", "~", "a b", "-x", "<<", "k #c", "é"}
	values := []string{"", " 1", " x", " -1", " 'q''s'", " \"e\\n\"", " [1, x]", " {a: 1, b: [2]}",
		" # c", " x # c", " yes", " 0x1F", " 1e3", " ~", " -", " a: b", " [", " {a: }", " \"\"", " 2001-12-14",
		" [a,\n", "\n  ]", " ---", " ...", " |", " &x", " *x", " !!str 1"}
	lines := []string{"#c", "---", "...", "-", "- ", "- -", "{a: 1,", "}", "]", "- # c", ""}
	rng := rand.New(rand.NewPCG(1, 2))
	accepted := 0
	for range 20000 {
		var b strings.Builder
		indent := 0
		for range 1 + rng.IntN(8) {
			// Mostly the indentation of the line before, or one step in
			// or out, as files that parse have.
			indent = max(0, indent+[]int{0, 0, 2, -2, 1, -4}[rng.IntN(6)])
			b.WriteString(strings.Repeat(" ", indent))
			switch n := rng.IntN(10); {
			case n < 5:
				b.WriteString(keys[rng.IntN(len(keys))] + ":" + values[rng.IntN(len(values))])
			case n < 8:
				b.WriteString("-")
				if rng.IntN(2) == 0 {
					b.WriteString(strings.Repeat(" ", 1+rng.IntN(3)) + keys[rng.IntN(len(keys))] + ":")
				}
				b.WriteString(values[rng.IntN(len(values))])
			default:
				b.WriteString(lines[rng.IntN(len(lines))])
			}
			b.WriteString("\n")
		}
		if checkFastDecode(t, []byte(b.String())) {
			accepted++
		}
		if t.Failed() {
			return
		}
	}
	if accepted < 500 {
		t.Errorf("the fast path accepted only %d generated files: the test no longer tests it", accepted)
	}
}
