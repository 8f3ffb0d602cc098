package store

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/no8s/no8s-agent/manifest"
)

// Every status change of every resource is a TopicStatus payload that the
// agent decodes and encodes again for its event stream, thousands a second
// in a burst of reconciles. The payloads are flat objects of known keys,
// written by the stores themselves, so they are read and written here by
// hand; anything else falls back to encoding/json, which has the last word.

// ParseStatusEvent decodes a TopicStatus payload.
func ParseStatusEvent(payload string) (StatusEvent, error) {
	if ev, ok := parseFlatStatusEvent(payload); ok {
		return ev, nil
	}
	var ev StatusEvent
	if err := json.Unmarshal([]byte(payload), &ev); err != nil {
		return ev, fmt.Errorf("status event %q: %w", payload, err)
	}
	return ev, nil
}

// parseFlatStatusEvent reads payload as an object of StatusEvent's keys
// with values of their types: strings without escapes, integers, booleans.
// It returns false for anything else, valid or not, which encoding/json
// then reads.
func parseFlatStatusEvent(s string) (StatusEvent, bool) {
	var (
		ev StatusEvent
		p  = flatParser{s: s}
	)
	if !p.byte('{') {
		return ev, false
	}
	if p.byte('}') {
		return ev, p.end()
	}
	for {
		key, ok := p.str()
		if !ok || !p.byte(':') {
			return ev, false
		}
		switch key {
		case "id":
			ok = p.int(&ev.ID)
		case "kind":
			ev.Kind, ok = p.str()
		case "namespace":
			ev.Namespace, ok = p.str()
		case "name":
			ev.Name, ok = p.str()
		case "source":
			ev.Source, ok = p.str()
		case "status":
			var phase string
			phase, ok = p.str()
			ev.Phase = manifest.Phase(phase)
		case "status_message":
			ev.Message, ok = p.str()
		case "generation":
			ok = p.int(&ev.Generation)
		case "observed_generation":
			ok = p.int(&ev.ObservedGeneration)
		case "deleted":
			ok = p.bool(&ev.Deleted)
		case "suspended":
			ok = p.bool(&ev.Suspended)
		default:
			return ev, false
		}
		if !ok {
			return ev, false
		}
		if p.byte('}') {
			return ev, p.end()
		}
		if !p.byte(',') {
			return ev, false
		}
	}
}

// flatParser reads a flat JSON object from s at i.
type flatParser struct {
	s string
	i int
}

// space skips JSON white space.
func (p *flatParser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte reads c after white space.
func (p *flatParser) byte(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *flatParser) end() bool {
	p.space()
	return p.i == len(p.s)
}

// str reads a string without escapes or control characters, in valid UTF-8.
func (p *flatParser) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start, ascii := p.i, true
	for ; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; {
		case c == '"':
			v := p.s[start:p.i]
			p.i++
			return v, ascii || utf8.ValidString(v)
		case c == '\\' || c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// int reads an integer as JSON writes it: no leading zero, sign or point.
func (p *flatParser) int(v *int64) bool {
	p.space()
	start := p.i
	if p.i < len(p.s) && p.s[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	if p.i == digits || (p.s[digits] == '0' && p.i-digits > 1) {
		return false
	}
	if p.i < len(p.s) && (p.s[p.i] == '.' || p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		return false
	}
	n, err := strconv.ParseInt(p.s[start:p.i], 10, 64)
	*v = n
	return err == nil
}

// bool reads true or false.
func (p *flatParser) bool(v *bool) bool {
	p.space()
	switch {
	case len(p.s)-p.i >= 4 && p.s[p.i:p.i+4] == "true":
		p.i += 4
		*v = true
	case len(p.s)-p.i >= 5 && p.s[p.i:p.i+5] == "false":
		p.i += 5
		*v = false
	default:
		return false
	}
	return true
}

// AppendJSON appends ev encoded as json.Marshal encodes it.
func (ev StatusEvent) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, ev.ID, 10)
	b = appendField(b, "kind", ev.Kind)
	b = appendField(b, "namespace", ev.Namespace)
	b = appendField(b, "name", ev.Name)
	b = appendField(b, "source", ev.Source)
	b = appendField(b, "status", string(ev.Phase))
	b = appendField(b, "status_message", ev.Message)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, ev.Generation, 10)
	b = append(b, `,"observed_generation":`...)
	b = strconv.AppendInt(b, ev.ObservedGeneration, 10)
	b = append(b, `,"deleted":`...)
	b = strconv.AppendBool(b, ev.Deleted)
	b = append(b, `,"suspended":`...)
	b = strconv.AppendBool(b, ev.Suspended)
	return append(b, '}')
}

// appendField appends a comma, the key and the string v as json.Marshal
// writes them: printable ASCII that needs no escape as it is, anything else
// through encoding/json.
func appendField(b []byte, key, v string) []byte {
	b = append(append(append(b, `,"`...), key...), `":`...)
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, _ := json.Marshal(v) // a string always encodes
			return append(b, quoted...)
		}
	}
	return append(append(append(b, '"'), v...), '"')
}
