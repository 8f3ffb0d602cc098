package postgres

import (
	"encoding/json"
	"fmt"
	"time"
)

// jsonDoc returns an opaque JSON document to store in a json column: nil
// (NULL) for an absent document.
func jsonDoc(m json.RawMessage) any {
	if len(m) == 0 {
		return nil
	}
	return []byte(m)
}

// rawDoc returns a document read from a json column.
func rawDoc(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// jsonValue marshals v for a jsonb column, writing empty as def ('{}' or
// '[]') so that the column never holds JSON null.
func jsonValue(v any, empty bool, def string) ([]byte, error) {
	if empty {
		return []byte(def), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

// decodeMap decodes a jsonb object; an empty object gives nil.
func decodeMap(b []byte, what string) (map[string]string, error) {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// decodeSlice decodes a jsonb array into *dst; an empty array gives nil.
func decodeSlice[T any](b []byte, what string) ([]T, error) {
	var s []T
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, err)
	}
	if len(s) == 0 {
		return nil, nil
	}
	return s, nil
}

// nullTime stores the zero time as NULL.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// utc returns t in UTC; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// utcPtr returns *t in UTC, or nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// timeOrZero turns a nullable time into a time, NULL being the zero time.
func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// millis converts a duration to whole milliseconds.
func millis(d time.Duration) int64 { return d.Milliseconds() }

// fromMillis converts whole milliseconds to a duration.
func fromMillis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
