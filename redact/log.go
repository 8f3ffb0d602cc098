package redact

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
)

// Handler returns a slog.Handler that masks every record before h sees it:
// the message, and the key and value of every attribute, in groups too,
// also the attributes and groups added with With and WithGroup.
//
// Strings are masked; an error, a []byte or any other value whose text
// (fmt's %+v, and JSON for values a JSON handler would marshal) holds a
// secret is replaced by its masked text. Attributes and groups given to
// With are kept here and applied at each record, so that values added to
// the Masker later still are masked in them.
func (m *Masker) Handler(h slog.Handler) slog.Handler {
	return &handler{m: m, h: h}
}

type handler struct {
	m *Masker
	h slog.Handler
	// chain holds what With and WithGroup added, in order: a group name, or
	// attributes.
	chain []link
}

type link struct {
	group string
	attrs []slog.Attr
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool { return h.h.Enabled(ctx, level) }

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return &handler{m: h.m, h: h.h, chain: append(slices.Clip(h.chain), link{attrs: slices.Clone(attrs)})}
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &handler{m: h.m, h: h.h, chain: append(slices.Clip(h.chain), link{group: name})}
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	t := h.m.table()
	if t.empty() && len(h.chain) == 0 {
		return h.h.Handle(ctx, r)
	}
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, a)
		return true
	})
	// Nest the record's attributes in the groups of the chain, from the
	// innermost out; slog leaves out groups that hold nothing.
	for i := len(h.chain) - 1; i >= 0; i-- {
		l := h.chain[i]
		if l.group == "" {
			attrs = append(slices.Clip(l.attrs), attrs...)
		} else if len(attrs) > 0 {
			attrs = []slog.Attr{{Key: l.group, Value: slog.GroupValue(attrs...)}}
		}
	}
	out := slog.NewRecord(r.Time, r.Level, t.mask(r.Message), r.PC)
	for _, a := range attrs {
		out.AddAttrs(t.attr(a))
	}
	return h.h.Handle(ctx, out)
}

// attr masks one attribute.
func (t *table) attr(a slog.Attr) slog.Attr {
	if t.empty() {
		return a
	}
	a.Key = t.mask(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(t.mask(v.String()))
	case slog.KindGroup:
		group := v.Group()
		masked := make([]slog.Attr, len(group))
		for i, g := range group {
			masked[i] = t.attr(g)
		}
		a.Value = slog.GroupValue(masked...)
	case slog.KindAny:
		a.Value = t.anyValue(v)
	default:
		// Numbers, booleans, times and durations hold no text.
		a.Value = v
	}
	return a
}

// anyValue masks a value of kind Any: replaced by its masked text when any
// text a handler could write for it holds a secret, kept as it is otherwise
// so that handlers still format it their way. Handlers differ: the text
// handler writes an error's Error, a TextMarshaler's text or %+v (which is
// String for a Stringer); the JSON handler writes an error's Error and
// marshals anything else, fields a String leaves out included.
func (t *table) anyValue(v slog.Value) slog.Value {
	var texts []string
	switch x := v.Any().(type) {
	case error:
		texts = append(texts, x.Error())
	case []byte:
		texts = append(texts, string(x))
	case json.RawMessage:
		texts = append(texts, string(x))
	default:
		if m, ok := x.(encoding.TextMarshaler); ok {
			if b, err := m.MarshalText(); err == nil {
				texts = append(texts, string(b))
			}
		}
		texts = append(texts, fmt.Sprintf("%+v", x))
		if data, err := json.Marshal(x); err == nil {
			texts = append(texts, string(data))
		}
	}
	if !slices.ContainsFunc(texts, t.contains) {
		return v
	}
	// The first text is the one the handlers would most likely write.
	return slog.StringValue(t.mask(texts[0]))
}
