package redact

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestMaskSkipsOnlyWhatCannotMatch masks random texts full of near misses
// with tables that jump to the bytes patterns start with, by one byte or
// by many, and with the same table testing every position: the results
// must be the same.
func TestMaskSkipsOnlyWhatCannotMatch(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	for _, values := range [][]string{
		{"ghp_0123456789abcdef0123"},                                             // one first byte
		{"ghp_0123456789abcdef0123", "ghp_zz99yy88xx77"},                         // one, shared
		{"s3cr3t-value-1", "Another\"Secret<>&", "p@ss w0rd/with?query=1&x=%41"}, // several, escapes
	} {
		fast := newTable(values)
		every := newTable(values)
		every.only = -1
		for i := range every.first {
			every.first[i] = true
		}
		var alphabet []string
		for _, p := range fast.patterns {
			alphabet = append(alphabet, p, p[:len(p)/2], p[1:], p[:len(p)-1])
		}
		alphabet = append(alphabet, "x", " ", "\"", "\\", "é", "g", "gh")
		for round := range 500 {
			var b strings.Builder
			for range rng.IntN(40) {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			text := b.String()
			if got, want := fast.mask(text), every.mask(text); got != want {
				t.Fatalf("values %q, round %d: text %q\nmasked %q\nwant   %q", values, round, text, got, want)
			}
			if got, want := fast.contains(text), every.contains(text); got != want {
				t.Fatalf("values %q, round %d: text %q: contains %v, want %v", values, round, text, got, want)
			}
		}
		if fmt.Sprint(fast.only >= 0) != fmt.Sprint(len(values) <= 2) {
			t.Errorf("values %q: one first byte is %v", values, fast.only >= 0)
		}
	}
}
