package celrules

import (
	"fmt"
	"regexp"
	"strings"
)

// fieldPathTokens splits a rule's fieldPath (.spec.ports, .labels['app.io/x'])
// into the names it steps through, the way Kubernetes reads one. The path
// has been checked by Kubernetes' own parser already, which keeps the
// names to itself; nil is returned for anything it would have refused.
func fieldPathTokens(path string) []string {
	var tokens []string
	for i := 0; i < len(path); {
		switch path[i] {
		case '.':
			j := i + 1
			for j < len(path) && !strings.ContainsRune(".[]", rune(path[j])) {
				j++
			}
			if j == i+1 {
				return nil
			}
			tokens = append(tokens, path[i+1:j])
			i = j
		case '[':
			// A quoted name runs to the first quote not escaped by a
			// backslash, as Kubernetes' scanner reads it.
			if i+1 >= len(path) || path[i+1] != '\'' {
				return nil
			}
			j := i + 2
			for j < len(path) && !(path[j] == '\'' && path[j-1] != '\\') {
				j++
			}
			if j+1 >= len(path) || path[j+1] != ']' {
				return nil
			}
			name, err := unescapeSingleQuote(path[i+2 : j])
			if err != nil {
				return nil
			}
			tokens = append(tokens, name)
			i = j + 2
		default:
			return nil
		}
	}
	return tokens
}

// escapeSequence matches a backslash and the character it escapes.
var escapeSequence = regexp.MustCompile(`\\.`)

// unescapeSingleQuote decodes the escapes Kubernetes allows in a quoted
// name of a fieldPath.
func unescapeSingleQuote(s string) (string, error) {
	var err error
	out := escapeSequence.ReplaceAllStringFunc(s, func(seq string) string {
		switch seq[1] {
		case 'a':
			return "\a"
		case 'b':
			return "\b"
		case 'f':
			return "\f"
		case 'n':
			return "\n"
		case 'r':
			return "\r"
		case 't':
			return "\t"
		case 'v':
			return "\v"
		case '\'':
			return "'"
		case '\\':
			return "\\"
		default:
			err = fmt.Errorf("invalid escape char %s", seq)
			return ""
		}
	})
	return out, err
}
