package preview

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCutComment checks that a preview too long for the host is cut to
// its limit between characters, and says where the rest is.
func TestCutComment(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 600) // 1,200 bytes
	for _, c := range []struct {
		name, text, dashboard string
		limit                 int
		want                  []string
	}{
		{"fits", "short", "", 100, []string{"short"}},
		{"cut, no dashboard", long, "", 1000, []string{"is cut here", "`no8s-agent diff`"}},
		{"cut, dashboard", long, "https://no8s.example.com/", 1000,
			[]string{"is cut here", "(https://no8s.example.com/sources/infra%2Fprod)"}},
	} {
		got := cutComment(c.text, c.limit, c.dashboard, "infra/prod")
		if len(got) > c.limit || !utf8.ValidString(got) {
			t.Errorf("%s: %d bytes (limit %d), valid UTF-8 %v", c.name, len(got), c.limit, utf8.ValidString(got))
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q does not say %q", c.name, got[max(0, len(got)-300):], w)
			}
		}
	}
}
