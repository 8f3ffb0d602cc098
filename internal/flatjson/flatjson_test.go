package flatjson_test

import (
	"encoding/json"
	"testing"

	"github.com/no8s/no8s-agent/internal/flatjson"
)

// TestReaderAgreesWithEncodingJSON reads single values: whatever the
// reader accepts, encoding/json reads as the same value.
func TestReaderAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	strs := []string{`"abc"`, ` "é日本" `, `""`, `"a\"b"`, `"a\nb"`, "\"a\nb\"", "\"\xff\"", `"unclosed`, `abc`}
	for _, in := range strs {
		r := flatjson.NewReader(in)
		got, ok := r.Str()
		ok = ok && r.End()
		var want string
		err := json.Unmarshal([]byte(in), &want)
		if ok && (err != nil || got != want) {
			t.Errorf("Str(%q) = %q, but encoding/json reads %q, %v", in, got, want, err)
		}
	}
	ints := []string{`0`, `-12`, ` 42 `, `9223372036854775807`, `9223372036854775808`, `01`, `1.5`, `1e3`, `-`, `x`}
	for _, in := range ints {
		r := flatjson.NewReader(in)
		got, ok := r.Int()
		ok = ok && r.End()
		var want int64
		err := json.Unmarshal([]byte(in), &want)
		if ok != (err == nil) || (ok && got != want) {
			t.Errorf("Int(%q) = %d, %v; encoding/json reads %d, %v", in, got, ok, want, err)
		}
	}
	bools := []string{`true`, ` false `, `tru`, `null`, `1`}
	for _, in := range bools {
		r := flatjson.NewReader(in)
		got, ok := r.Bool()
		ok = ok && r.End()
		var want bool
		err := json.Unmarshal([]byte(in), &want)
		if ok != (err == nil && in != `null`) || (ok && got != want) {
			t.Errorf("Bool(%q) = %v, %v; encoding/json reads %v, %v", in, got, ok, want, err)
		}
	}
}
