package manifest

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// fastDecode decodes the YAML most manifests are written in, and JSON,
// without building yaml.v3's node tree: block mappings and sequences, plain
// and quoted scalars, and flow collections (a JSON document is one). It
// gives up (ok=false) at anything else, such as anchors, aliases, tags,
// block scalars, multi-line scalars, tabs, duplicate keys, merge keys, or a
// document that is not a mapping, and on anything it would report as a
// problem: DecodeFile then decodes the file with yaml.v3, which applies
// every limit and locates every problem. What it accepts it decodes to the
// values, indexes and lines yaml.v3 gives, scalars resolved by yaml.v3's own
// rules; the documents find their field lines by parsing their file again
// with yaml.v3 if a problem needs one. Keys and values share memory with one
// copy of data: what is kept after the documents are dropped is cloned.
func fastDecode(file string, data []byte) (docs []*Document, ok bool) {
	if len(data) == 0 {
		return nil, true
	}
	if !plainText(data) {
		return nil, false
	}
	src := string(data)
	lazy := &lazyRoots{data: data}
	p := fastParser{}
	index := -1
	start := 0 // the first line of the current document
	lines := strings.Split(src, "\n")
	flush := func(end int, explicit bool) bool {
		// lines[start:end] are the current document's.
		p.lines = p.lines[:0]
		for i := start; i < end; i++ {
			l := lines[i]
			text := strings.TrimLeft(l, " ")
			text = strings.TrimRight(text, " ")
			if text == "" || text[0] == '#' {
				continue
			}
			p.lines = append(p.lines, fastLine{indent: len(l) - len(strings.TrimLeft(l, " ")), text: text, num: i + 1})
		}
		if len(p.lines) == 0 {
			if explicit {
				index++ // an empty document: counted, not returned
			}
			return true
		}
		index++
		p.i = 0
		var (
			v    any
			line = p.lines[0].num
		)
		if c := p.lines[0].text[0]; c == '{' || c == '[' {
			// A flow collection, as JSON is, may span lines.
			first := p.lines[0]
			raw := strings.Join(lines[first.num-1:end], "\n")[first.indent:]
			f := flowParser{s: raw, multiline: true}
			var good bool
			if v, good = f.value(); !good {
				return false
			}
			f.space()
			if f.pos != len(f.s) {
				return false
			}
		} else {
			var good bool
			if v, good = p.block(p.lines[0].indent); !good || p.i != len(p.lines) {
				return false
			}
		}
		obj, isMap := v.(map[string]any)
		if !isMap {
			return false
		}
		docs = append(docs, &Document{File: file, Index: index, Line: line, Object: obj, lazy: lazy})
		return true
	}
	explicit := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "---"):
			if strings.TrimRight(l, " ") != "---" {
				return nil, false
			}
			if !flush(i, explicit) {
				return nil, false
			}
			start, explicit = i+1, true
		case strings.HasPrefix(l, "...") || strings.HasPrefix(l, "%"):
			return nil, false
		}
	}
	if !flush(len(lines), explicit) {
		return nil, false
	}
	return docs, true
}

// plainText reports whether data holds only what fastDecode handles
// everywhere: printable characters as YAML defines them, spaces and line
// feeds (no tabs, carriage returns or other line breaks).
func plainText(data []byte) bool {
	for i := 0; i < len(data); {
		b := data[i]
		if b < utf8.RuneSelf {
			if (b < 0x20 && b != '\n') || b == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError, r < 0xa0, r == 0x2028, r == 0x2029, r == 0xfeff,
			r >= 0xd800 && r < 0xe000, r == 0xfffe, r == 0xffff:
			return false
		}
		i += size
	}
	return true
}

const (
	// maxFastKey is the most bytes fastDecode reads from the start of a
	// key to its ':' (quotes, escapes and spaces count); longer keys are
	// left to yaml.v3, which limits implicit keys to 1024 characters.
	maxFastKey = 1000
	// maxFastDepth is the deepest nesting fastDecode follows; deeper
	// documents are left to yaml.v3 and its own limits.
	maxFastDepth = 100
)

type fastLine struct {
	indent int
	text   string // without indentation and trailing spaces
	num    int    // one-based
}

// fastParser parses block YAML one line at a time.
type fastParser struct {
	lines []fastLine
	i     int
	depth int
}

// block parses the node whose first line is the current one, at indent.
func (p *fastParser) block(indent int) (any, bool) {
	l := p.lines[p.i]
	if l.indent != indent || p.depth >= maxFastDepth {
		return nil, false
	}
	p.depth++
	defer func() { p.depth-- }()
	if isSeqItem(l.text) {
		return p.sequence(indent)
	}
	return p.mapping(indent)
}

func isSeqItem(text string) bool {
	return text == "-" || strings.HasPrefix(text, "- ")
}

func (p *fastParser) mapping(indent int) (any, bool) {
	out := map[string]any{}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < indent {
			break
		}
		if l.indent > indent || isSeqItem(l.text) {
			return nil, false
		}
		key, rest, ok := splitKey(l.text)
		if !ok {
			return nil, false
		}
		if _, dup := out[key]; dup {
			return nil, false
		}
		p.i++
		var val any
		if rest == "" {
			// The value is on the lines below: more indented, or a list
			// at the key's own indentation.
			if p.i < len(p.lines) {
				next := p.lines[p.i]
				if next.indent > indent || (next.indent == indent && isSeqItem(next.text)) {
					if val, ok = p.block(next.indent); !ok {
						return nil, false
					}
				}
			}
		} else {
			if val, ok = inlineValue(rest); !ok {
				return nil, false
			}
			if p.i < len(p.lines) && p.lines[p.i].indent > indent {
				return nil, false // a multi-line scalar, or a mistake
			}
		}
		out[key] = val
	}
	return out, true
}

func (p *fastParser) sequence(indent int) (any, bool) {
	out := []any{}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < indent || (l.indent == indent && !isSeqItem(l.text)) {
			break
		}
		if l.indent > indent {
			return nil, false
		}
		rest := strings.TrimLeft(l.text[1:], " ")
		if rest == "" || rest[0] == '#' {
			p.i++
			var val any
			if p.i < len(p.lines) && p.lines[p.i].indent > indent {
				var ok bool
				if val, ok = p.block(p.lines[p.i].indent); !ok {
					return nil, false
				}
			}
			out = append(out, val)
			continue
		}
		if isSeqItem(rest) {
			return nil, false // a list in a list on one line
		}
		if _, _, isKey := splitKey(rest); isKey {
			// A mapping starting on the item's line: its keys are indented
			// as its first one.
			p.lines[p.i] = fastLine{indent: l.indent + len(l.text) - len(rest), text: rest, num: l.num}
			val, ok := p.block(p.lines[p.i].indent)
			if !ok {
				return nil, false
			}
			out = append(out, val)
			continue
		}
		val, ok := inlineValue(rest)
		if !ok {
			return nil, false
		}
		p.i++
		if p.i < len(p.lines) && p.lines[p.i].indent > indent {
			return nil, false
		}
		out = append(out, val)
	}
	return out, true
}

// splitKey splits "key: rest" or "key:"; rest is "" when the value is not
// on the line (a comment is not a value).
func splitKey(text string) (key, rest string, ok bool) {
	switch text[0] {
	case '"', '\'':
		f := flowParser{s: text}
		k, good := f.quoted()
		if !good || f.pos >= len(f.s) || f.s[f.pos] != ':' {
			return "", "", false
		}
		key, rest = k, f.s[f.pos+1:]
		if rest != "" && rest[0] != ' ' || f.pos > maxFastKey {
			return "", "", false
		}
	default:
		if !plainStart(text, false) {
			return "", "", false
		}
		i := strings.Index(text, ": ")
		if i < 0 {
			if !strings.HasSuffix(text, ":") {
				return "", "", false
			}
			i = len(text) - 1
		}
		key, rest = strings.TrimRight(text[:i], " "), text[i+1:]
		if key == "" || key == "<<" || i > maxFastKey || strings.ContainsAny(key, "#:[]{},") {
			return "", "", false
		}
	}
	rest = strings.TrimLeft(rest, " ")
	if strings.HasPrefix(rest, "#") {
		rest = ""
	}
	return key, rest, true
}

// plainStart reports whether s may start a plain scalar: not with an
// indicator, except '-', '?' and ':' followed by a character that is not
// a space (or, in flow context, not a flow indicator).
func plainStart(s string, flow bool) bool {
	switch s[0] {
	case '-', '?', ':':
		if len(s) == 1 || s[1] == ' ' || s[1] == '\n' || (flow && strings.IndexByte(",[]{}", s[1]) >= 0) {
			return false
		}
		// "-1", "-foo", ":x" are plain; keep "?" and ":" out anyway, as
		// the rules around them are subtle.
		return s[0] == '-'
	case ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return false
	}
	return true
}

// inlineValue parses the value that follows a key or a list item's dash on
// the same line, up to an optional comment.
func inlineValue(s string) (any, bool) {
	switch s[0] {
	case '"', '\'', '{', '[':
		f := flowParser{s: s}
		v, ok := f.value()
		if !ok {
			return nil, false
		}
		f.space()
		return v, f.pos == len(f.s)
	}
	if !plainStart(s, false) {
		return nil, false
	}
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimRight(s[:i], " ")
	}
	if strings.Contains(s, ": ") || strings.HasSuffix(s, ":") {
		return nil, false
	}
	return resolvePlain(s)
}

// resolvePlain gives a plain scalar the value yaml.v3 and the converter
// would: the tag by yaml.v3's resolution, the value by converter.scalar.
// yaml.v3 resolves by the first character; most scalars are strings or
// small integers, answered here without it.
func resolvePlain(s string) (any, bool) {
	switch c := s[0]; {
	case c == '+' || c == '-' || c == '.' || c == '<' || ('0' <= c && c <= '9'):
		if isSmallInt(s) {
			return json.Number(s), true
		}
	case strings.IndexByte("yYnNtTfFoO~", c) >= 0:
		switch s {
		case "true", "True", "TRUE":
			return true, true
		case "false", "False", "FALSE":
			return false, true
		case "~", "null", "Null", "NULL":
			return nil, true
		}
		return s, true
	default:
		return s, true
	}
	var c converter
	v, err := c.scalar(&yaml.Node{Kind: yaml.ScalarNode, Value: s})
	return v, err == nil
}

// isSmallInt reports whether s is a decimal integer in canonical form
// (no sign but '-', no leading zero, not -0) that fits an int64 for sure.
func isSmallInt(s string) bool {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || len(digits) > 18 || (digits[0] == '0' && (len(digits) > 1 || s != digits)) {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// flowParser parses flow collections and quoted scalars. Unless multiline,
// its input is the rest of one line.
type flowParser struct {
	s         string
	pos       int
	multiline bool
	depth     int
}

// space skips spaces, and comments and line breaks when multiline.
func (f *flowParser) space() {
	for f.pos < len(f.s) {
		switch c := f.s[f.pos]; {
		case c == ' ':
			f.pos++
		case c == '\n' && f.multiline:
			f.pos++
		case c == '#' && (f.pos == 0 || f.s[f.pos-1] == ' ' || f.s[f.pos-1] == '\n'):
			end := strings.IndexByte(f.s[f.pos:], '\n')
			if end < 0 || !f.multiline {
				f.pos = len(f.s)
			} else {
				f.pos += end
			}
		default:
			return
		}
	}
}

func (f *flowParser) value() (any, bool) {
	if f.pos >= len(f.s) {
		return nil, false
	}
	switch f.s[f.pos] {
	case '{', '[':
		if f.depth >= maxFastDepth {
			return nil, false
		}
		f.depth++
		defer func() { f.depth-- }()
		if f.s[f.pos] == '{' {
			return f.mapping()
		}
		return f.sequence()
	case '"', '\'':
		return f.quoted()
	}
	s, ok := f.plain()
	if !ok {
		return nil, false
	}
	return resolvePlain(s)
}

// plain reads a plain scalar in flow context: it ends at a flow indicator,
// a comment or the end of the line; one holding ':' or '?' (which yaml.v3
// ends a flow scalar at) is left to yaml.v3.
func (f *flowParser) plain() (string, bool) {
	if !plainStart(f.s[f.pos:], true) {
		return "", false
	}
	start := f.pos
	for f.pos < len(f.s) {
		c := f.s[f.pos]
		if c == ',' || c == '[' || c == ']' || c == '{' || c == '}' || c == '\n' || c == ':' || c == '?' ||
			(c == '#' && f.s[f.pos-1] == ' ') {
			break
		}
		f.pos++
	}
	if f.pos < len(f.s) && (f.s[f.pos] == ':' || f.s[f.pos] == '?') {
		return "", false
	}
	return strings.TrimRight(f.s[start:f.pos], " "), true
}

func (f *flowParser) mapping() (any, bool) {
	f.pos++ // {
	out := map[string]any{}
	for {
		f.space()
		if f.pos >= len(f.s) {
			return nil, false
		}
		if f.s[f.pos] == '}' {
			f.pos++
			return out, true
		}
		var key string
		keyStart := f.pos
		if c := f.s[f.pos]; c == '"' || c == '\'' {
			k, ok := f.quoted()
			if !ok {
				return nil, false
			}
			key = k
			for f.pos < len(f.s) && f.s[f.pos] == ' ' {
				f.pos++ // an implicit key does not span lines
			}
			if f.pos >= len(f.s) || f.s[f.pos] != ':' {
				return nil, false
			}
			f.pos++
		} else {
			if !plainStart(f.s[f.pos:], true) {
				return nil, false
			}
			start := f.pos
			for f.pos < len(f.s) && strings.IndexByte(":,[]{}#?\n", f.s[f.pos]) < 0 {
				f.pos++
			}
			key = strings.TrimRight(f.s[start:f.pos], " ")
			if f.pos+1 >= len(f.s) || f.s[f.pos] != ':' || (f.s[f.pos+1] != ' ' && f.s[f.pos+1] != '\n') {
				return nil, false
			}
			if key == "" || key == "<<" {
				return nil, false
			}
			f.pos++
		}
		if f.pos-keyStart > maxFastKey {
			return nil, false
		}
		if _, dup := out[key]; dup {
			return nil, false
		}
		f.space()
		if f.pos >= len(f.s) || f.s[f.pos] == ',' || f.s[f.pos] == '}' {
			return nil, false // an empty value: left to yaml.v3
		}
		v, ok := f.value()
		if !ok {
			return nil, false
		}
		out[key] = v
		f.space()
		if f.pos < len(f.s) && f.s[f.pos] == ',' {
			f.pos++
			continue
		}
		if f.pos >= len(f.s) || f.s[f.pos] != '}' {
			return nil, false
		}
	}
}

func (f *flowParser) sequence() (any, bool) {
	f.pos++ // [
	out := []any{}
	for {
		f.space()
		if f.pos >= len(f.s) {
			return nil, false
		}
		if f.s[f.pos] == ']' {
			f.pos++
			return out, true
		}
		v, ok := f.value()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		f.space()
		if f.pos < len(f.s) && f.s[f.pos] == ',' {
			f.pos++
			continue
		}
		if f.pos >= len(f.s) || f.s[f.pos] != ']' {
			return nil, false
		}
	}
}

// quoted reads a single- or double-quoted scalar on one line. Escapes other
// than the common ones are left to yaml.v3.
func (f *flowParser) quoted() (string, bool) {
	q := f.s[f.pos]
	f.pos++
	var b strings.Builder
	start := f.pos
	for f.pos < len(f.s) {
		c := f.s[f.pos]
		switch {
		case c == '\n':
			return "", false
		case c == q && q == '\'':
			if f.pos+1 < len(f.s) && f.s[f.pos+1] == '\'' {
				b.WriteString(f.s[start : f.pos+1])
				f.pos += 2
				start = f.pos
				continue
			}
			b.WriteString(f.s[start:f.pos])
			f.pos++
			return b.String(), f.afterQuoted()
		case c == q:
			b.WriteString(f.s[start:f.pos])
			f.pos++
			return b.String(), f.afterQuoted()
		case c == '\\' && q == '"':
			if f.pos+1 >= len(f.s) {
				return "", false
			}
			var r byte
			switch f.s[f.pos+1] {
			case '"', '\\':
				r = f.s[f.pos+1]
			case 'n':
				r = '\n'
			case 't':
				r = '\t'
			case 'r':
				r = '\r'
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			default:
				return "", false
			}
			b.WriteString(f.s[start:f.pos])
			b.WriteByte(r)
			f.pos += 2
			start = f.pos
			continue
		}
		f.pos++
	}
	return "", false
}

// afterQuoted reports whether what follows a closing quote may: a space,
// the end, or what continues a flow collection or a key.
func (f *flowParser) afterQuoted() bool {
	if f.pos >= len(f.s) {
		return true
	}
	return strings.IndexByte(" \n,]}:", f.s[f.pos]) >= 0
}
