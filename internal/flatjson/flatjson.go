// Package flatjson reads the small JSON documents the agent's own stores
// write by the thousand (status events, conditions) faster than
// encoding/json can: strings without escapes, integers and booleans, read
// in place. A reader says false at the first thing it does not know, valid
// JSON or not, and its caller then hands the document to encoding/json,
// which has the last word.
package flatjson

import (
	"strconv"
	"unicode/utf8"
)

// Reader reads JSON tokens from a string, in order.
type Reader struct {
	s string
	i int
}

// NewReader returns a Reader at the start of s.
func NewReader(s string) *Reader { return &Reader{s: s} }

// space skips JSON white space.
func (r *Reader) space() {
	for r.i < len(r.s) {
		switch r.s[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// Byte reads c, after white space, if it comes next.
func (r *Reader) Byte(c byte) bool {
	r.space()
	if r.i < len(r.s) && r.s[r.i] == c {
		r.i++
		return true
	}
	return false
}

// End reports whether only white space is left.
func (r *Reader) End() bool {
	r.space()
	return r.i == len(r.s)
}

// Str reads a string without escapes or control characters, in valid
// UTF-8. The string shares the document's memory.
func (r *Reader) Str() (string, bool) {
	if !r.Byte('"') {
		return "", false
	}
	start, ascii := r.i, true
	for ; r.i < len(r.s); r.i++ {
		switch c := r.s[r.i]; {
		case c == '"':
			v := r.s[start:r.i]
			r.i++
			return v, ascii || utf8.ValidString(v)
		case c == '\\' || c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// Int reads an integer as JSON writes one: no leading zero, point or
// exponent.
func (r *Reader) Int() (int64, bool) {
	r.space()
	start := r.i
	if r.i < len(r.s) && r.s[r.i] == '-' {
		r.i++
	}
	digits := r.i
	for r.i < len(r.s) && r.s[r.i] >= '0' && r.s[r.i] <= '9' {
		r.i++
	}
	if r.i == digits || (r.s[digits] == '0' && r.i-digits > 1) {
		return 0, false
	}
	if r.i < len(r.s) && (r.s[r.i] == '.' || r.s[r.i] == 'e' || r.s[r.i] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(r.s[start:r.i], 10, 64)
	return n, err == nil
}

// Bool reads true or false.
func (r *Reader) Bool() (v, ok bool) {
	r.space()
	switch {
	case len(r.s)-r.i >= 4 && r.s[r.i:r.i+4] == "true":
		r.i += 4
		return true, true
	case len(r.s)-r.i >= 5 && r.s[r.i:r.i+5] == "false":
		r.i += 5
		return false, true
	}
	return false, false
}
