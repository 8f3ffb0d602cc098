package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// CanonicalJSON encodes a decoded value as canonical JSON: object keys sorted,
// no insignificant whitespace, no HTML escaping, numbers in canonical form.
// Two values that mean the same encode to the same bytes.
func CanonicalJSON(v any) (json.RawMessage, error) {
	v, err := canonicalNumbers(v)
	if err != nil {
		return nil, err
	}
	var w canonicalWriter
	if w.value(v) {
		// Exact size: specs are kept for as long as their resources.
		return bytes.Clone(w.buf), nil
	}
	// A value of a type the writer does not know: encoding/json says how it
	// encodes, or why it cannot.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// encoding/json sorts map keys, which is what makes the output canonical.
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode canonical JSON: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// canonicalWriter writes decoded JSON values exactly as encoding/json does
// with HTML escaping off, without its reflection.
type canonicalWriter struct {
	buf  []byte
	keys []string
}

// value appends v and reports whether it could: false for values of types
// a decoded document does not hold, and numbers that are not valid JSON.
func (w *canonicalWriter) value(v any) bool {
	switch x := v.(type) {
	case nil:
		w.buf = append(w.buf, "null"...)
	case bool:
		w.buf = strconv.AppendBool(w.buf, x)
	case string:
		w.string(x)
	case json.Number:
		if !validNumber(string(x)) {
			return false
		}
		w.buf = append(w.buf, x...)
	case []any:
		w.buf = append(w.buf, '[')
		for i, e := range x {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			if !w.value(e) {
				return false
			}
		}
		w.buf = append(w.buf, ']')
	case map[string]any:
		start := len(w.keys)
		for k := range x {
			w.keys = append(w.keys, k)
		}
		keys := w.keys[start:]
		slices.Sort(keys)
		w.buf = append(w.buf, '{')
		for i, k := range keys {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.string(k)
			w.buf = append(w.buf, ':')
			if !w.value(x[k]) {
				return false
			}
		}
		w.buf = append(w.buf, '}')
		w.keys = w.keys[:start]
	default:
		return false
	}
	return true
}

// string appends s quoted as encoding/json does without HTML escaping:
// control characters escaped, U+2028 and U+2029 too, invalid UTF-8 replaced.
func (w *canonicalWriter) string(s string) {
	const hex = "0123456789abcdef"
	w.buf = append(w.buf, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			w.buf = append(w.buf, s[start:i]...)
			switch b {
			case '\\', '"':
				w.buf = append(w.buf, '\\', b)
			case '\b':
				w.buf = append(w.buf, '\\', 'b')
			case '\f':
				w.buf = append(w.buf, '\\', 'f')
			case '\n':
				w.buf = append(w.buf, '\\', 'n')
			case '\r':
				w.buf = append(w.buf, '\\', 'r')
			case '\t':
				w.buf = append(w.buf, '\\', 't')
			default:
				w.buf = append(w.buf, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			w.buf = append(w.buf, s[start:i]...)
			w.buf = append(w.buf, "\\ufffd"...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			w.buf = append(w.buf, s[start:i]...)
			w.buf = append(w.buf, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	w.buf = append(w.buf, s[start:]...)
	w.buf = append(w.buf, '"')
}

// validNumber reports whether s is a JSON number, as encoding/json requires
// of a json.Number it writes.
func validNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = s[1:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[2:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	return s == ""
}

// CanonicalizeJSON rewrites arbitrary JSON into canonical JSON.
func CanonicalizeJSON(data []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode JSON: %w", err)
	}
	return CanonicalJSON(v)
}

// HashJSON returns "sha256:<hex>" of canonical JSON bytes.
func HashJSON(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalNumbers rewrites json.Number values (which may come from JSON
// decoded with UseNumber) into canonical form, in place.
func canonicalNumbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return x, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", x)
		}
		return canonicalNumberText(string(x), f), nil
	case float64:
		return canonicalNumber(x), nil
	case int:
		return json.Number(strconv.Itoa(x)), nil
	case int64:
		return json.Number(strconv.FormatInt(x, 10)), nil
	case map[string]any:
		for k, e := range x {
			c, err := canonicalNumbers(e)
			if err != nil {
				return nil, err
			}
			if replaced(e, c) {
				// Only changed values are written back: most are
				// canonical already, and writing costs.
				x[k] = c
			}
		}
	case []any:
		for i, e := range x {
			c, err := canonicalNumbers(e)
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
	}
	return v, nil
}

// replaced reports whether canonicalNumbers returned c for e instead of e
// itself; maps and lists are rewritten in place, never replaced.
func replaced(e, c any) bool {
	switch e.(type) {
	case map[string]any, []any:
		return false
	case json.Number:
		n, ok := c.(json.Number)
		return !ok || n != e.(json.Number)
	}
	return true
}

// deepCopy copies a decoded JSON value, so that defaults taken from a schema
// are never shared between specs.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}
