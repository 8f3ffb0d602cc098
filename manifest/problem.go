package manifest

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Problem is one thing wrong with the manifests: where it is and what it is.
type Problem struct {
	// File is the path relative to the source root; empty for problems not tied to a file.
	File string `json:"file,omitempty"`
	// Line is one-based; zero when unknown.
	Line int `json:"line,omitempty"`
	// Document is the zero-based index of the document within the file.
	Document int `json:"document"`
	// Pointer is the RFC 6901 JSON pointer of the offending field within the
	// document, e.g. /spec/storage_gb; empty when the problem is the whole document.
	Pointer string `json:"pointer,omitempty"`
	// Message says what is wrong, for people.
	Message string `json:"message"`
}

// String formats the problem as "file:line: message"; the message names the
// field itself. Control characters are escaped (a file name holding one is
// quoted), so that a problem is always one line, and a file name cannot
// forge lines of output or logs.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(QuotePath(p.File))
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	}
	b.WriteString(EscapeControl(p.Message))
	return b.String()
}

// unsafeRune reports whether r must not be printed raw: control characters
// (newlines, escape sequences of terminals) and the Unicode line separators
// and bidirectional overrides, which change how the rest of a line reads.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' ||
		(r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069') || r == utf8.RuneError
}

// QuotePath returns a path ready to print: as it is when it holds only
// printable characters, else quoted as a Go string ("a\nb.yaml"), so that
// it cannot forge a line of output and what it really holds is visible.
func QuotePath(p string) string {
	if strings.IndexFunc(p, unsafeRune) < 0 {
		return p
	}
	return strconv.Quote(p)
}

// EscapeControl replaces the characters QuotePath would quote for by their
// Go escapes (\n, \x1b, \u202e), leaving the rest of s as it is.
func EscapeControl(s string) string {
	if strings.IndexFunc(s, unsafeRune) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ValidationError is the list of problems found in a set of manifests. It is
// returned whole, so that one run reports every mistake, not just the first.
type ValidationError struct {
	Problems []Problem
}

// Error implements error.
func (e *ValidationError) Error() string {
	switch len(e.Problems) {
	case 0:
		return "invalid manifests"
	case 1:
		return e.Problems[0].String()
	}
	return fmt.Sprintf("%s (and %d more problems)", e.Problems[0].String(), len(e.Problems)-1)
}

// problems collects Problems; the zero value is ready to use.
type problems []Problem

func (ps *problems) add(p Problem) { *ps = append(*ps, p) }

// err returns nil when there are no problems, or a *ValidationError.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps}
}

// FieldPath turns a JSON pointer into the dotted path people read in
// messages: /spec/items/0/name becomes spec.items[0].name.
func FieldPath(pointer string) string {
	if pointer == "" {
		return ""
	}
	var b strings.Builder
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		if isIndex(tok) {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
