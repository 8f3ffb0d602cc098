package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// decoder decodes JSON into the configuration types strictly, by walking
// the types' json tags. encoding/json's DisallowUnknownFields stops at the
// first unknown key and does not say where it is; this walk reports every
// unknown key and every mistyped value with its full key path, and records
// which keys were written so that defaults do not replace explicit zeros.
type decoder struct {
	problems problems
	written  map[string]bool
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// decode decodes raw into the value ptr points at; key is its path.
func (d *decoder) decode(key string, raw json.RawMessage, ptr any) {
	d.value(key, raw, reflect.ValueOf(ptr).Elem())
}

func (d *decoder) value(key string, raw json.RawMessage, v reflect.Value) {
	raw = bytes.TrimSpace(raw)
	// An empty YAML value ("prune:") is null: treat it as left out.
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	d.written[key] = true
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			d.failed(key, "%s", err.Error())
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.value(key, raw, v.Elem())
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			d.mistyped(key, raw, "a mapping")
			return
		}
		fields, names := jsonFields(v.Type())
		for _, name := range sortedKeys(obj) {
			i, ok := fields[name]
			if !ok {
				d.problems.add(join(key, name), "unknown key (known keys: %s)", strings.Join(names, ", "))
				continue
			}
			d.value(join(key, name), obj[name], v.Field(i))
		}
	case reflect.Slice:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			d.mistyped(key, raw, "a list")
			return
		}
		s := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, item := range items {
			d.value(fmt.Sprintf("%s[%d]", key, i), item, s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			d.mistyped(key, raw, "a mapping")
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(obj))
		for _, name := range sortedKeys(obj) {
			e := reflect.New(v.Type().Elem()).Elem()
			d.value(join(key, name), obj[name], e)
			m.SetMapIndex(reflect.ValueOf(name), e)
		}
		v.Set(m)
	case reflect.String:
		if json.Unmarshal(raw, v.Addr().Interface()) != nil {
			d.mistyped(key, raw, "a string")
		}
	case reflect.Bool:
		if json.Unmarshal(raw, v.Addr().Interface()) != nil {
			d.mistyped(key, raw, "true or false")
		}
	case reflect.Int:
		if json.Unmarshal(raw, v.Addr().Interface()) != nil {
			d.mistyped(key, raw, "a whole number")
		}
	default:
		// Only reachable if a field of an unsupported type is added.
		panic(fmt.Sprintf("config: cannot decode %s (%s)", key, v.Type()))
	}
}

// mistyped reports a value of the wrong JSON type, quoting short values.
func (d *decoder) mistyped(key string, raw json.RawMessage, want string) {
	got := "a number " + string(raw)
	switch raw[0] {
	case '"':
		got = "the string " + string(raw)
	case '{':
		got = "a mapping"
	case '[':
		got = "a list"
	case 't', 'f':
		got = string(raw)
		if want == "a string" {
			// YAML 1.1 reads unquoted y, yes, on (and n, no, off) as booleans.
			got += " (quote the value: YAML reads unquoted yes, no, on, off, y and n as true or false)"
		}
	}
	d.failed(key, "must be %s, not %s", want, got)
}

// failed reports a value that could not be decoded. The key then counts as
// not written, so the default fills it and no later check reports the
// same mistake again as a missing or zero value.
func (d *decoder) failed(key, format string, args ...any) {
	delete(d.written, key)
	d.problems.add(key, format, args...)
}

// jsonFields maps the json names of a struct's exported fields to their
// indexes, and lists the names for messages.
func jsonFields(t reflect.Type) (map[string]int, []string) {
	fields := map[string]int{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = i
		names = append(names, name)
	}
	return fields, names
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// join appends a mapping key to a key path.
func join(key, name string) string {
	if key == "" {
		return name
	}
	return key + "." + name
}
