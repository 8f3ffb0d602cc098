package manifest

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// encodingJSON is how CanonicalJSON wrote values before it had its own
// writer: its output must stay byte for byte the same, or every stored spec
// hash would change.
func encodingJSON(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func TestCanonicalJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	var all strings.Builder
	for b := range 0x80 {
		all.WriteByte(byte(b))
	}
	strs := []string{"", "plain", all.String(), "<a href=\"x\">&amp;</a>", "tab\there", "line\u2028sep\u2029para",
		"bad \xff utf8 \xc3", "emoji 🙂 é", "\\", "\x7f\x00\b\f", "ünïcödé keys"}
	values := []any{
		nil, true, false, json.Number("0"), json.Number("-12"), json.Number("1.5e-7"), json.Number("123456789012345678901234567890"),
		[]any{}, map[string]any{}, []any{nil, json.Number("1"), "x", []any{map[string]any{"b": "1", "a": []any{}}}},
	}
	for _, s := range strs {
		values = append(values, s, map[string]any{s: s, "z" + s: []any{s}})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var random func(depth int) any
	random = func(depth int) any {
		switch n := rng.IntN(7); {
		case depth > 3 || n == 0:
			return strs[rng.IntN(len(strs))]
		case n == 1:
			return json.Number([]string{"0", "7", "-3", "2.25", "1e+21"}[rng.IntN(5)])
		case n == 2:
			return rng.IntN(2) == 0
		case n == 3:
			return nil
		case n == 4:
			l := make([]any, rng.IntN(4))
			for i := range l {
				l[i] = random(depth + 1)
			}
			return l
		default:
			m := map[string]any{}
			for range rng.IntN(6) {
				m[strs[rng.IntN(len(strs))]+string(rune('a'+rng.IntN(26)))] = random(depth + 1)
			}
			return m
		}
	}
	for range 300 {
		values = append(values, random(0))
	}
	for _, v := range values {
		c, err := canonicalNumbers(deepCopy(v))
		if err != nil {
			t.Fatal(err)
		}
		want := encodingJSON(t, c)
		got, err := CanonicalJSON(v)
		if err != nil {
			t.Fatalf("CanonicalJSON(%#v): %v", v, err)
		}
		if string(got) != want {
			t.Errorf("CanonicalJSON(%#v)\n got %s\nwant %s", v, got, want)
		}
	}
}

func TestCanonicalJSONRefusesInvalidNumbers(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"+1", "01", "-07", "NaN", "x", "1e"} {
		if got, err := CanonicalJSON(map[string]any{"n": json.Number(n)}); err == nil {
			t.Errorf("json.Number(%q) encoded as %s", n, got)
		}
	}
}

func TestValidNumber(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		s    string
		want bool
	}{
		{"0", true}, {"-0", true}, {"12", true}, {"1.5", true}, {"1e5", true}, {"1E+5", true}, {"-1.25e-3", true},
		{"", false}, {"-", false}, {"01", false}, {"1.", false}, {".1", false}, {"1e", false}, {"1e+", false},
		{"+1", false}, {"0x1", false}, {"1.5.5", false}, {" 1", false},
	} {
		if got := validNumber(tt.s); got != tt.want {
			t.Errorf("validNumber(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}
