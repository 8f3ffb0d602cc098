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

// String formats the problem as "file:line: message (at pointer)".
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
	if p.Pointer != "" {
		fmt.Fprintf(&b, " (at %s)", p.Pointer)
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
