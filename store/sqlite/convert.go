package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// scanner is what *sql.Row and *sql.Rows have in common.
type scanner interface {
	Scan(dest ...any) error
}

// jsonDoc returns an opaque JSON document to store in a TEXT column: nil
// (NULL) for an absent document. It is passed as a string, never as
// []byte: SQLite would store bytes as a BLOB, which its JSON functions
// read as its binary JSONB format.
func jsonDoc(m json.RawMessage) any {
	if len(m) == 0 {
		return nil
	}
	return string(m)
}

// validDoc fails with ErrInvalid unless m is absent or well-formed JSON, as
// PostgreSQL's json columns do.
func validDoc(m json.RawMessage, what string) error {
	if len(m) > 0 && !json.Valid(m) {
		return invalid("%s is not valid JSON", what)
	}
	return nil
}

// rawDoc returns a document read from a JSON column.
func rawDoc(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// jsonValue marshals v for a JSON column, writing empty as def ('{}' or
// '[]') so that the column never holds JSON null.
func jsonValue(v any, empty bool, def string) (string, error) {
	if empty {
		return def, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode %T: %w", v, err)
	}
	return string(b), nil
}

// decodeMap decodes a JSON object; an empty object gives nil.
func decodeMap(s string, what string) (map[string]string, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// decodeSlice decodes a JSON array; an empty array gives nil.
func decodeSlice[T any](s string, what string) ([]T, error) {
	var out []T
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// ms converts a time to Unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// msPtr converts an optional time to Unix milliseconds, nil (NULL) for none.
func msPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

// msOrNull stores the zero time as NULL.
func msOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// fromMs converts Unix milliseconds to a UTC time. The zero time, stored as
// its own milliseconds, comes back zero.
func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }

// fromNullMs converts nullable Unix milliseconds to an optional UTC time.
func fromNullMs(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMs(v.Int64)
	return &t
}

// timeOrZero converts nullable Unix milliseconds to a time, NULL being the
// zero time.
func timeOrZero(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMs(v.Int64)
}

// utc returns t in UTC; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// millis converts a duration to whole milliseconds.
func millis(d time.Duration) int64 { return d.Milliseconds() }

// fromMillis converts whole milliseconds to a duration.
func fromMillis(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// jsonArray encodes values as a JSON array parameter, which queries unpack
// with json_each: one parameter for any number of values, where a list of
// placeholders would run into SQLite's limit on parameters.
func jsonArray[T any](values []T) (string, error) {
	if len(values) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(values)
	if err != nil {
		return "", fmt.Errorf("encode %T: %w", values, err)
	}
	return string(b), nil
}
