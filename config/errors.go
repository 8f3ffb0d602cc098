package config

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Key is the path of the offending setting, like sources[1].git.url or
	// --source for a flag; empty when the problem is not tied to one key.
	Key string
	// Message says what is wrong.
	Message string
}

// String formats the problem as "key: message".
func (p Problem) String() string {
	if p.Key == "" {
		return p.Message
	}
	return p.Key + ": " + p.Message
}

// Error is every problem found in a configuration. It is returned whole so
// that one run reports every mistake, not just the first.
type Error struct {
	// File is the configuration file, when the problems come from one.
	File string
	// Problems are in the order found.
	Problems []Problem
}

// Error lists the problems one per line, each prefixed with the file.
func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		if e.File != "" {
			b.WriteString(e.File)
			b.WriteString(": ")
		}
		b.WriteString(p.String())
	}
	if b.Len() == 0 {
		return "invalid configuration"
	}
	return b.String()
}

// problems collects Problems, one per key: a value that could not be
// decoded is reported once, not again by each check that then sees it
// missing. The zero value is ready to use.
type problems []Problem

func (ps *problems) add(key, format string, args ...any) {
	if key != "" {
		for _, p := range *ps {
			if p.Key == key {
				return
			}
		}
	}
	*ps = append(*ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &Error{Problems: ps}
}
