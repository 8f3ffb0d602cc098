package store

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/no8s/no8s-agent/internal/flatjson"
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
	var ev StatusEvent
	p := flatjson.NewReader(s)
	if !p.Byte('{') {
		return ev, false
	}
	if p.Byte('}') {
		return ev, p.End()
	}
	for {
		key, ok := p.Str()
		if !ok || !p.Byte(':') {
			return ev, false
		}
		switch key {
		case "id":
			ev.ID, ok = p.Int()
		case "kind":
			ev.Kind, ok = p.Str()
		case "namespace":
			ev.Namespace, ok = p.Str()
		case "name":
			ev.Name, ok = p.Str()
		case "source":
			ev.Source, ok = p.Str()
		case "status":
			var phase string
			phase, ok = p.Str()
			ev.Phase = manifest.Phase(phase)
		case "status_message":
			ev.Message, ok = p.Str()
		case "generation":
			ev.Generation, ok = p.Int()
		case "observed_generation":
			ev.ObservedGeneration, ok = p.Int()
		case "deleted":
			ev.Deleted, ok = p.Bool()
		case "suspended":
			ev.Suspended, ok = p.Bool()
		default:
			return ev, false
		}
		if !ok {
			return ev, false
		}
		if p.Byte('}') {
			return ev, p.End()
		}
		if !p.Byte(',') {
			return ev, false
		}
	}
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
