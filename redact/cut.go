package redact

import "strings"

// MinPiece is the length, in bytes, from which a piece of a value left at a
// cut edge is masked (see MaskCut). A shorter piece is left: replacing the
// last few bytes of every cut text that happen to begin a value would
// mangle it, and a piece that short gives little of a value away.
const MinPiece = 4

// MaskCut masks s, a piece of a longer text that was cut off before s
// (head) or after it (tail) without being masked first, and also masks what
// the cut left of a value at that edge: a tail of s that begins a value (in
// any of its forms), a head of s that ends one. Where the whole text is at
// hand, mask it before cutting instead; MaskCut is for text kept a piece at
// a time, such as the first bytes of a long line or the last bytes of a
// stream.
func (m *Masker) MaskCut(s string, head, tail bool) string {
	t := m.table()
	if t.empty() {
		return s
	}
	start, end := 0, len(s)
	if tail {
		end -= t.trailingPiece(s)
	}
	if head {
		start = t.leadingPiece(s[:end])
	}
	out := t.mask(s[start:end])
	if start > 0 {
		out = Placeholder + out
	}
	if end < len(s) {
		out += Placeholder
	}
	return out
}

// trailingPiece returns the length of the longest tail of s, at least
// MinPiece long, that begins a pattern without being all of it, or 0.
func (t *table) trailingPiece(s string) int {
	best := 0
	for _, p := range t.patterns {
		for i := max(len(s)-len(p)+1, 0); i+MinPiece <= len(s) && len(s)-i > best; i++ {
			if strings.HasPrefix(p, s[i:]) {
				best = len(s) - i
				break
			}
		}
	}
	return best
}

// leadingPiece returns the length of the longest head of s, at least
// MinPiece long, that ends a pattern without being all of it, or 0.
func (t *table) leadingPiece(s string) int {
	best := 0
	for _, p := range t.patterns {
		for i := 1; len(p)-i >= MinPiece && len(p)-i > best; i++ {
			if strings.HasPrefix(s, p[i:]) {
				best = len(p) - i
				break
			}
		}
	}
	return best
}
