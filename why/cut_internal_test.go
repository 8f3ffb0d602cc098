package why

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestOneLineCutsBetweenWords: a cut never leaves part of a word, wide
// spaces included, and stays within its bound.
func TestOneLineCutsBetweenWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short enough", 20, "short enough"},
		{"alpha beta gamma", 10, "alpha beta…"},
		{"alpha beta gamma", 12, "alpha beta…"},
		{"alpha beta  gamma", 11, "alpha beta…"},
		{"alpha\u3000bétagamma", 9, "alpha…"},
		{"onewordthatislong", 5, "…"},
		{"line one\nline\ttwo", 100, "line one line two"},
	} {
		got := oneLine(tc.in, tc.n)
		if got != tc.want || !utf8.ValidString(got) || utf8.RuneCountInString(strings.TrimSuffix(got, "…")) > tc.n {
			t.Errorf("oneLine(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
