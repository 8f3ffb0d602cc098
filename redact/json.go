package redact

import (
	"encoding/json"
	"strings"
)

// MaskJSON masks the secret values inside the strings of a JSON document,
// object keys included, and leaves everything else as written (layout,
// order, numbers), so that the result is valid JSON whenever raw is.
// Replacing text in the document as a whole could not promise that: a
// value may match across a quote. Each string is masked decoded, so that
// a value written with escapes (\u0041) is found too. Text that is not
// valid JSON is masked as text. raw is returned as is when nothing in it
// is secret.
func (m *Masker) MaskJSON(raw json.RawMessage) json.RawMessage { return m.table().maskJSON(raw) }

func (t *table) maskJSON(raw json.RawMessage) json.RawMessage {
	if t.empty() || len(raw) == 0 {
		return raw
	}
	s := string(raw)
	if !t.contains(s) && !hidingEscapes(s) {
		// No string can decode to a secret: its canonical JSON form, which
		// is among the forms looked for, would be in the document. (Text
		// that is not JSON holds no secret either.)
		return raw
	}
	if !json.Valid(raw) {
		if masked := t.mask(s); masked != s {
			return json.RawMessage(masked)
		}
		return raw
	}
	var b strings.Builder
	last := 0 // s[:last] is copied or replaced into b
	for i := 0; i < len(s); i++ {
		if s[i] != '"' {
			continue
		}
		// In valid JSON a quote outside a string opens one; find where it
		// closes, skipping escaped characters.
		j := i + 1
		for s[j] != '"' {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		lit := s[i : j+1]
		i = j
		text := lit[1 : len(lit)-1]
		if strings.IndexByte(text, '\\') >= 0 {
			if err := json.Unmarshal([]byte(lit), &text); err != nil {
				continue // cannot happen in valid JSON
			}
		}
		masked := t.mask(text)
		if masked == text {
			continue
		}
		if b.Len() == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last : j+1-len(lit)])
		b.WriteString(jsonQuote(masked))
		last = j + 1
	}
	if last == 0 {
		return raw
	}
	b.WriteString(s[last:])
	return json.RawMessage(b.String())
}

// hidingEscapes reports whether JSON text has escapes other than the short
// ones encoding/json writes for quotes, backslashes, newlines, returns and
// tabs: \u, \/, \b or \f may spell any character of a secret.
func hidingEscapes(s string) bool {
	for i := 0; i < len(s)-1; i++ {
		if s[i] != '\\' {
			continue
		}
		i++
		switch s[i] {
		case 'u', '/', 'b', 'f':
			return true
		}
	}
	return false
}

// jsonQuote is s as a JSON string, quotes included.
func jsonQuote(s string) string {
	return `"` + jsonString(s, false) + `"`
}
