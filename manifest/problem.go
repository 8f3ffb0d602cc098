package manifest

import (
	"fmt"
	"strings"
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
// field itself.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
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
