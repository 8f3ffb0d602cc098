package dashboard

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// render writes a diff as a unified diff's body, one op and line each.
func render(lines []diffLine) string {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%c%s\n", l.Op, l.Text)
	}
	return b.String()
}

func TestDiffText(t *testing.T) {
	t.Parallel()
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	tests := []struct{ a, b, want string }{
		{"", "", ""},
		{"a,b", "a,b", " a\n b\n"},
		{"", "a", "+a\n"},
		{"a", "", "-a\n"},
		{"a,b,c", "a,x,c", " a\n-b\n+x\n c\n"},
		{"a,b,c,d", "a,c,d,e", " a\n-b\n c\n d\n+e\n"},
		{"x,a,b", "a,b,y", "-x\n a\n b\n+y\n"},
		// A line moved: the longest common run is kept.
		{"a,b,c,d", "b,c,d,a", "-a\n b\n c\n d\n+a\n"},
		{"a,a,b", "a,b,b", " a\n-a\n+b\n b\n"},
	}
	for _, tt := range tests {
		got := diffText(split(tt.a), split(tt.b))
		if s := render(got); s != tt.want {
			t.Errorf("diff %q %q =\n%s\nwant\n%s", tt.a, tt.b, s, tt.want)
		}
		// Every line of both is there, numbered in order.
		old, nw := 0, 0
		for _, l := range got {
			if l.Op != opAdd {
				old++
				if l.Old != old {
					t.Errorf("diff %q %q: old line %d numbered %d", tt.a, tt.b, old, l.Old)
				}
			}
			if l.Op != opDel {
				nw++
				if l.New != nw {
					t.Errorf("diff %q %q: new line %d numbered %d", tt.a, tt.b, nw, l.New)
				}
			}
		}
		if old != len(split(tt.a)) || nw != len(split(tt.b)) {
			t.Errorf("diff %q %q covers %d and %d lines", tt.a, tt.b, old, nw)
		}
	}
}

// TestDiffTooLarge diffs texts too large for the table: still every line,
// removed then added.
func TestDiffTooLarge(t *testing.T) {
	t.Parallel()
	n := 3000
	a, b := make([]string, n), make([]string, n)
	for i := range n {
		a[i], b[i] = fmt.Sprint("a", i), fmt.Sprint("b", i)
	}
	a[0], b[0], a[n-1], b[n-1] = "same", "same", "end", "end"
	got := diffText(a, b)
	if len(got) != 2+2*(n-2) || got[0].Op != opSame || got[1].Op != opDel || got[n-1].Op != opAdd || got[len(got)-1].Op != opSame {
		t.Errorf("a large diff has %d lines", len(got))
	}
}

func TestSpecLines(t *testing.T) {
	t.Parallel()
	got := strings.Join(specLines(json.RawMessage(`{"b": 1, "a": {"y": [1, 2.50], "x": "<b>&"}}`)), "\n")
	want := `{
  "a": {
    "x": "<b>&",
    "y": [
      1,
      2.50
    ]
  },
  "b": 1
}`
	if got != want {
		t.Errorf("specLines =\n%s\nwant\n%s", got, want)
	}
	if got := specLines(nil); got != nil {
		t.Errorf("no spec: %q", got)
	}
	if got := specLines(json.RawMessage("not json\nat all")); len(got) != 2 {
		t.Errorf("a spec that does not parse: %q", got)
	}
}

func TestHunks(t *testing.T) {
	t.Parallel()
	var a []string
	for i := range 20 {
		a = append(a, fmt.Sprint(i))
	}
	b := append([]string(nil), a...)
	b[2] = "two"
	b[15] = "fifteen"
	hs := hunks(diffText(a, b))
	if len(hs) != 2 {
		t.Fatalf("%d hunks, want 2", len(hs))
	}
	h := hs[0]
	if h.OldStart != 1 || h.OldLines != 6 || h.NewStart != 1 || h.NewLines != 6 || len(h.Lines) != 7 {
		t.Errorf("first hunk -%d,%d +%d,%d with %d lines", h.OldStart, h.OldLines, h.NewStart, h.NewLines, len(h.Lines))
	}
	h = hs[1]
	if h.OldStart != 13 || h.OldLines != 7 || h.NewStart != 13 || len(h.Lines) != 8 {
		t.Errorf("second hunk -%d,%d +%d,%d with %d lines", h.OldStart, h.OldLines, h.NewStart, h.NewLines, len(h.Lines))
	}
	// Side by side, the changed line sits next to its replacement.
	var paired bool
	for _, r := range hs[0].Rows {
		if r.Left != nil && r.Right != nil && r.Left.Text == "2" && r.Right.Text == "two" {
			paired = true
		}
	}
	if !paired || len(hs[0].Rows) != 6 {
		t.Errorf("split rows: %d, paired %v", len(hs[0].Rows), paired)
	}
	// Changes close together make one hunk.
	b = append([]string(nil), a...)
	b[5], b[10] = "five", "ten"
	if hs := hunks(diffText(a, b)); len(hs) != 1 {
		t.Errorf("changes 5 lines apart make %d hunks", len(hs))
	}
	if hs := hunks(diffText(a, a)); len(hs) != 0 {
		t.Errorf("no change makes %d hunks", len(hs))
	}
}
