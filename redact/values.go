package redact

import (
	"encoding/json"
	"html"
	"reflect"
	"strings"
)

// MarkdownCell escapes text for a cell of a Markdown table: a pipe would
// end the cell (and so would one after an escaped backslash: "\\|") and a
// newline the row, and angle brackets would open HTML; an @ is followed by
// a word joiner, so that "@all" or "@user" notifies no one. Pull-request
// comments write table cells with it, and the Masker knows the form it
// gives.
func MarkdownCell(s string) string { return markdownCell.Replace(s) }

var markdownCell = strings.NewReplacer(`\`, `\\`, "|", `\|`, "\n", " ", "\r", "", "<", "&lt;", ">", "&gt;", "@", "@"+wordJoiner)

// HTMLText escapes text inside an HTML element of a pull-request comment:
// html.EscapeString, and an @ followed by a word joiner, so that a
// mention in the text notifies no one. The Masker knows the form it gives.
func HTMLText(s string) string { return strings.ReplaceAll(html.EscapeString(s), "@", "@"+wordJoiner) }

// wordJoiner is U+2060, invisible: after an @ it keeps what follows from
// being read as a user or group name.
const wordJoiner = "\u2060"

// MaskValues returns a copy of v in which every string v holds is masked:
// strings, and named string types, in structs (exported fields), pointers,
// slices, arrays, maps (keys too) and interfaces, at any depth;
// json.RawMessage is masked with MaskJSON, other byte slices as text. It is
// what masking before rendering means: a value masked this way is then
// escaped, quoted, cut or folded by whatever renders it (HTML, Markdown,
// JSON, YAML, a truncated cell) without a piece of a secret surviving in a
// form the Masker does not know.
//
// v itself is not changed. Unexported fields are copied as they are,
// unmasked, so text an error keeps in unexported fields (most errors do) is
// not reached: mask err.Error() instead. Two map keys that differ only by a
// secret become one. Without secrets v is returned as it is.
func MaskValues[T any](m *Masker, v T) T {
	t := m.table()
	if t.empty() {
		return v
	}
	w := walker{t: t, seen: map[pointer]reflect.Value{}}
	in := reflect.ValueOf(&v).Elem()
	out := w.walk(in)
	return out.Interface().(T)
}

// walker copies values, masking their strings. seen maps the pointers
// already copied to their copies, so that cycles and shared pointers are
// copied once.
type walker struct {
	t    *table
	seen map[pointer]reflect.Value
}

// pointer identifies a pointer: its type and address.
type pointer struct {
	typ  reflect.Type
	addr uintptr
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func (w *walker) walk(v reflect.Value) reflect.Value {
	typ := v.Type()
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		masked := w.t.mask(s)
		if masked == s {
			return v
		}
		return reflect.ValueOf(masked).Convert(typ)
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		key := pointer{typ, v.Pointer()}
		if c, ok := w.seen[key]; ok {
			return c
		}
		c := reflect.New(typ.Elem())
		w.seen[key] = c
		c.Elem().Set(w.walk(v.Elem()))
		return c
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		c := reflect.New(typ).Elem()
		c.Set(w.walk(v.Elem()))
		return c
	case reflect.Struct:
		c := reflect.New(typ).Elem()
		c.Set(v)
		for i := range typ.NumField() {
			if typ.Field(i).IsExported() {
				c.Field(i).Set(w.walk(v.Field(i)))
			}
		}
		return c
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		if typ.Elem().Kind() == reflect.Uint8 {
			b := v.Bytes()
			var masked []byte
			if typ == rawMessageType {
				masked = w.t.maskJSON(b)
			} else {
				masked = []byte(w.t.mask(string(b)))
			}
			return reflect.ValueOf(append([]byte(nil), masked...)).Convert(typ)
		}
		c := reflect.MakeSlice(typ, v.Len(), v.Len())
		for i := range v.Len() {
			c.Index(i).Set(w.walk(v.Index(i)))
		}
		return c
	case reflect.Array:
		c := reflect.New(typ).Elem()
		for i := range v.Len() {
			c.Index(i).Set(w.walk(v.Index(i)))
		}
		return c
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeMapWithSize(typ, v.Len())
		it := v.MapRange()
		for it.Next() {
			c.SetMapIndex(w.walk(it.Key()), w.walk(it.Value()))
		}
		return c
	}
	// Numbers, booleans, channels and functions hold no text.
	return v
}
