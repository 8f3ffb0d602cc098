package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	gosync "sync"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Document is one YAML or JSON document of a manifest file, decoded into
// JSON-compatible values: map[string]any, []any, string, bool, nil and
// json.Number (always in canonical form, see canonicalNumber).
type Document struct {
	// File is the path of the file relative to the source root.
	File string
	// Index is the zero-based position of the document within the file,
	// counting empty documents too, so that it matches what an editor shows.
	Index int
	// Line is the one-based line on which the document's content starts.
	Line int
	// Object is the decoded document.
	Object map[string]any

	// root is kept to map JSON pointers back to lines for error messages.
	// Documents decoded without yaml.v3 share their file's lazyRoots
	// instead, which parse the file when a line is first asked for.
	root *yaml.Node
	lazy *lazyRoots
}

// Origin returns where the document is.
func (d *Document) Origin() Origin { return Origin{File: d.File, Document: d.Index, Line: d.Line} }

// Problem returns a Problem located at the field the JSON pointer names, or at
// the document when the pointer is empty or does not resolve.
func (d *Document) Problem(pointer, format string, args ...any) Problem {
	msg := fmt.Sprintf(format, args...)
	if pointer != "" {
		msg = FieldPath(pointer) + ": " + msg
	}
	return Problem{File: d.File, Line: d.LineOf(pointer), Document: d.Index, Pointer: pointer, Message: msg}
}

// LineOf returns the line of the field the JSON pointer names. It walks the
// YAML tree as far as the pointer resolves and returns the line of the deepest
// node reached, so a missing field points at its parent.
func (d *Document) LineOf(pointer string) int {
	n := d.root
	if n == nil && d.lazy != nil {
		n = d.lazy.root(d.Index)
	}
	if n == nil {
		return d.Line
	}
	line := n.Line
	if pointer == "" || pointer == "/" {
		return line
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		next := (*yaml.Node)(nil)
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == tok {
					line = n.Content[i].Line
					next = n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

// utf8BOM is the UTF-8 byte order mark, which files may start with.
const utf8BOM = "\xef\xbb\xbf"

// lazyRoots are the yaml.v3 node trees of one file's documents, parsed the
// first time one is asked for: only problems need them.
type lazyRoots struct {
	data  []byte // without byte order mark
	once  gosync.Once
	roots []*yaml.Node // by document index
}

// root returns the content node of the document at index, as decodeYAML
// finds it, or nil.
func (l *lazyRoots) root(index int) *yaml.Node {
	l.once.Do(func() {
		dec := yaml.NewDecoder(bytes.NewReader(l.data))
		for {
			var root yaml.Node
			if err := dec.Decode(&root); err != nil {
				return
			}
			var content *yaml.Node
			if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
				content = root.Content[0]
			}
			l.roots = append(l.roots, content)
		}
	})
	if index < 0 || index >= len(l.roots) {
		return nil
	}
	return l.roots[index]
}

// DecodeOptions bound the work one file may cause.
type DecodeOptions struct {
	// AliasExpansion caps how many values a document may expand to, as a
	// multiple of the values written in it; YAML aliases beyond it are rejected
	// as an alias bomb. Zero means DefaultAliasExpansion.
	AliasExpansion int
	// MaxExpandedSize caps the bytes of keys and scalar values a document
	// may expand to through YAML aliases, so that a small file cannot
	// stand for a huge spec. A document never counts as over the limit for
	// what its file holds as written. Zero means DefaultMaxFileSize.
	MaxExpandedSize int64
}

// DefaultAliasExpansion lets aliases expand a document to ten times its written size.
const DefaultAliasExpansion = 10

// errExpansion aborts the conversion of a document whose aliases expand too far.
var errExpansion = errors.New("document expands to too many values through YAML aliases (alias bomb?)")

// sizeError aborts the conversion of a document whose aliases expand to
// more bytes than allowed.
type sizeError struct{ limit int64 }

func (e *sizeError) Error() string {
	return fmt.Sprintf("document expands to more than %d bytes through YAML aliases (alias bomb?)", e.limit)
}

var (
	yamlLineRE   = regexp.MustCompile(`line (\d+)`)
	yamlAnchorRE = regexp.MustCompile(`unknown anchor '([^']*)' referenced`)
)

// yamlParserErrors are the messages of yaml.v3's parser (as opposed to its
// scanner), which reports their line zero-based.
var yamlParserErrors = []string{
	"did not find expected <document start>",
	"did not find expected node content",
	"did not find expected key",
	"did not find expected '-' indicator",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
}

// yamlLinePrefixRE is the "line N: " yaml.v3 starts its messages with.
var yamlLinePrefixRE = regexp.MustCompile(`^line \d+: `)

// yamlProblem is the problem of a yaml.v3 syntax error: at the line it is
// about, which the message then does not repeat (yaml.v3 counts some of
// its lines from zero, so the two would disagree).
func yamlProblem(file string, index int, msg string, data []byte) Problem {
	line := yamlErrorLine(msg, data)
	msg = strings.TrimPrefix(msg, "yaml: ")
	if line > 0 {
		msg = yamlLinePrefixRE.ReplaceAllString(msg, "")
	}
	return Problem{File: file, Document: index, Line: line, Message: "invalid YAML: " + msg}
}

// yamlErrorLine finds the one-based line a yaml.v3 error is about.
func yamlErrorLine(msg string, data []byte) int {
	if m := yamlAnchorRE.FindStringSubmatch(msg); m != nil {
		if i := bytes.Index(data, []byte("*"+m[1])); i >= 0 {
			return 1 + bytes.Count(data[:i], []byte("\n"))
		}
		return 0
	}
	m := yamlLineRE.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	line, _ := strconv.Atoi(m[1])
	for _, p := range yamlParserErrors {
		if strings.Contains(msg, p) {
			return line + 1
		}
	}
	return line
}

// DecodeFile decodes every document of a YAML or JSON file (JSON is decoded
// as the YAML it is a subset of, which gives line numbers for both). Empty
// documents and documents holding only null are skipped. The problems name the
// file, document and line; the documents decoded before a syntax error are
// returned too, but callers treating the file as a whole should discard them.
func DecodeFile(file string, data []byte, opts DecodeOptions) ([]*Document, []Problem) {
	if opts.AliasExpansion <= 0 {
		opts.AliasExpansion = DefaultAliasExpansion
	}
	if opts.MaxExpandedSize <= 0 {
		opts.MaxExpandedSize = DefaultMaxFileSize
	}
	// What the file holds as written is within the limit by definition: the
	// limit is about what aliases add.
	opts.MaxExpandedSize = max(opts.MaxExpandedSize, int64(len(data)))
	data = bytes.TrimPrefix(data, []byte(utf8BOM)) // a UTF-8 byte order mark is harmless
	if !utf8.Valid(data) {
		at := firstInvalidUTF8(data)
		return nil, []Problem{{
			File:    file,
			Line:    1 + bytes.Count(data[:at], []byte("\n")),
			Message: fmt.Sprintf("file is not valid UTF-8 (bad byte 0x%02x at offset %d)", data[at], at),
		}}
	}
	if docs, ok := fastDecode(file, data); ok {
		return docs, nil
	}
	return decodeYAML(file, data, opts)
}

// decodeYAML is DecodeFile through yaml.v3's node tree: every document, any
// YAML, with the limits of opts and problems located.
func decodeYAML(file string, data []byte, opts DecodeOptions) ([]*Document, []Problem) {
	var (
		docs []*Document
		errs problems
		dec  = yaml.NewDecoder(bytes.NewReader(data))
	)
	for index := 0; ; index++ {
		var root yaml.Node
		err := dec.Decode(&root)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs.add(yamlProblem(file, index, err.Error(), data))
			break // the decoder cannot resynchronise after a syntax error
		}
		content := &root
		if root.Kind == yaml.DocumentNode {
			if len(root.Content) == 0 {
				continue
			}
			content = root.Content[0]
		}
		if content.Kind == yaml.ScalarNode && content.ShortTag() == "!!null" {
			continue
		}
		doc := &Document{File: file, Index: index, Line: content.Line, root: content}
		c := converter{budget: opts.AliasExpansion*countNodes(content) + 1000,
			bytes: opts.MaxExpandedSize, maxBytes: opts.MaxExpandedSize}
		v, err := c.value(content)
		if err != nil {
			var pe *pointerError
			if errors.As(err, &pe) {
				p := doc.Problem(pe.pointer, "%s", pe.msg)
				if pe.line > 0 {
					p.Line = pe.line
				}
				errs.add(p)
			} else {
				errs.add(doc.Problem("", "%v", err))
			}
			continue
		}
		obj, ok := v.(map[string]any)
		if !ok {
			errs.add(doc.Problem("", "document must be a mapping with apiVersion, kind and metadata, not %s", describe(v)))
			continue
		}
		doc.Object = obj
		docs = append(docs, doc)
	}
	return docs, errs
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// countNodes counts the nodes written in a document, not following aliases.
func countNodes(n *yaml.Node) int {
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}

// pointerError is a conversion error at a JSON pointer within the document.
type pointerError struct {
	pointer string
	msg     string
	// line, when set, is more precise than the pointer's, e.g. for the
	// second of two duplicate keys.
	line int
}

func (e *pointerError) Error() string { return e.pointer + ": " + e.msg }

// converter turns a YAML node tree into JSON-compatible values, expanding
// aliases and merge keys within a budget of values and one of bytes (of
// keys and scalar values: what a stored spec would hold).
type converter struct {
	budget   int
	bytes    int64
	maxBytes int64
	path     []string
}

// spend takes n bytes from the byte budget.
func (c *converter) spend(n int) error {
	c.bytes -= int64(n)
	if c.bytes < 0 {
		return &sizeError{limit: c.maxBytes}
	}
	return nil
}

func (c *converter) fail(format string, args ...any) error {
	return &pointerError{pointer: c.pointer(), msg: fmt.Sprintf(format, args...)}
}

func (c *converter) pointer() string {
	if len(c.path) == 0 {
		return ""
	}
	var b strings.Builder
	for _, p := range c.path {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(p))
	}
	return b.String()
}

func (c *converter) value(n *yaml.Node) (any, error) {
	c.budget--
	if c.budget < 0 {
		return nil, errExpansion
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.value(n.Content[0])
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, c.fail("unknown YAML alias %q", n.Value)
		}
		return c.value(n.Alias)
	case yaml.ScalarNode:
		if err := c.spend(len(n.Value)); err != nil {
			return nil, err
		}
		return c.scalar(n)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			c.path = append(c.path, strconv.Itoa(i))
			v, err := c.value(item)
			c.path = c.path[:len(c.path)-1]
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		if err := c.mapping(n, out, false); err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, c.fail("unsupported YAML node")
}

// mapping fills out with the pairs of n. Merged pairs (<<) never override
// pairs written in the mapping itself, and duplicate written keys are errors,
// as in strict Kubernetes decoding.
func (c *converter) mapping(n *yaml.Node, out map[string]any, merged bool) error {
	written := make(map[string]bool, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			return c.fail("mapping keys must be strings, not a %s", kindName(k.Kind))
		}
		key := k.Value
		if written[key] {
			c.path = append(c.path, key)
			err := &pointerError{pointer: c.pointer(), msg: fmt.Sprintf("duplicate key %q", key), line: k.Line}
			c.path = c.path[:len(c.path)-1]
			return err
		}
		written[key] = true
		if merged {
			if _, exists := out[key]; exists {
				continue
			}
		}
		if err := c.spend(len(key)); err != nil {
			return err
		}
		c.path = append(c.path, key)
		val, err := c.value(v)
		c.path = c.path[:len(c.path)-1]
		if err != nil {
			return err
		}
		out[key] = val
	}
	for _, m := range merges {
		for m.Kind == yaml.AliasNode && m.Alias != nil {
			m = m.Alias
		}
		var sources []*yaml.Node
		switch m.Kind {
		case yaml.MappingNode:
			sources = []*yaml.Node{m}
		case yaml.SequenceNode:
			sources = m.Content
		default:
			return c.fail("merge key << needs a mapping or a list of mappings")
		}
		for _, s := range sources {
			for s.Kind == yaml.AliasNode && s.Alias != nil {
				s = s.Alias
			}
			if s.Kind != yaml.MappingNode {
				return c.fail("merge key << needs a mapping or a list of mappings")
			}
			c.budget -= len(s.Content)
			if c.budget < 0 {
				return errExpansion
			}
			if err := c.mapping(s, out, true); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *converter) scalar(n *yaml.Node) (any, error) {
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!binary", "!!timestamp":
		// Timestamps stay as written: JSON has no time type, and rewriting
		// the user's text would change the spec hash for no reason.
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, c.fail("invalid boolean %q", n.Value)
		}
		return b, nil
	case "!!int":
		if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
			return json.Number(strconv.FormatInt(i, 10)), nil
		}
		// Beyond int64: kept exactly, as big integers, never rounded
		// through float64.
		b, ok := new(big.Int).SetString(n.Value, 0)
		if !ok {
			return nil, c.fail("invalid integer %q", n.Value)
		}
		if f, _ := new(big.Float).SetInt(b).Float64(); math.IsInf(f, 0) {
			return nil, c.fail("integer %s is too large: numbers must be within ±%g", n.Value, math.MaxFloat64)
		}
		return json.Number(b.String()), nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, c.fail("invalid number %q", n.Value)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, c.fail("%v cannot be represented in JSON", f)
		}
		return canonicalNumberText(strings.ReplaceAll(n.Value, "_", ""), f), nil
	default:
		return nil, c.fail("unsupported YAML tag %s", tag)
	}
}

// maxExactInt is 2^53: integers up to it are exact in float64.
const maxExactInt = 1 << 53

// canonicalNumber writes integral values as integers and others in the
// shortest form that round-trips, so that 1, 1.0 and 1e0 hash alike.
func canonicalNumber(f float64) json.Number {
	if f == math.Trunc(f) && math.Abs(f) < maxExactInt {
		return json.Number(strconv.FormatInt(int64(f), 10))
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
}

// canonicalNumberText is canonicalNumber for a number written as text
// whose float64 value is f. Integers beyond float64's exact range keep the
// exact value written (1e29 is 100000000000000000000000000000, not
// 99999999999999991433150857216 or 1e+29 read back as that), so that no
// digit is silently rounded; 1e29 and its digits still hash alike.
func canonicalNumberText(text string, f float64) json.Number {
	if f != math.Trunc(f) || math.Abs(f) < maxExactInt {
		return canonicalNumber(f)
	}
	if r, ok := new(big.Rat).SetString(text); ok && r.IsInt() {
		return json.Number(r.Num().String())
	}
	return canonicalNumber(f)
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "scalar"
}

// describe names the JSON type of a decoded value for error messages.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
