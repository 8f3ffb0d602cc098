// Package redact replaces secret values with "***" in text the agent writes
// or serves: stored status, outputs and history, HTTP responses, log
// records and pull-request comments.
//
// A Masker knows the values, learnt at start (the tokens, passwords and
// action secrets the configuration names); it is empty until told any. It
// masks each value in the forms the agent itself could write it in: as is,
// without surrounding white space, escaped inside a JSON or Go string,
// escaped for HTML, in a Markdown table cell, and escaped for a URL; and,
// for a value that is a URL, its secret parts on their own (see urlParts).
// It does not chase encodings that only another program could apply
// (base64, hex, a value cut in pieces): masking is a safety net against a
// value echoed by accident, not a defence against an action that wants to
// leak it.
//
// What the agent renders itself (a pull-request comment, a notification,
// the CLI's output) is masked before it is rendered, with MaskValues, so
// that escaping, quoting, folding or cutting the text cannot leave a form
// or a piece of a value the Masker does not know; the rendered text is
// masked again.
//
// Values shorter than MinLength are not masked: replacing a short value
// wherever it occurs would mangle ordinary words, names and numbers in
// every message and response (a username "deploy" would turn "deployed"
// into "***ed"). The agent warns about them at start.
//
// Text is scanned once whatever the number of values: a bit set indexed
// by the two bytes at each position of a text says whether a value may
// start there, and only then are the values that start with those bytes
// compared, longest first. Without a match that is a bit test per byte,
// and nothing is allocated unless something is masked.
package redact

import (
	"encoding/json"
	"html"
	"html/template"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Placeholder replaces every secret value.
const Placeholder = "***"

// MinLength is the length, in bytes, under which a value is not masked.
// Eight is the rule GitLab applies to masked CI/CD variables: long enough
// that a value is unlikely to be an ordinary word, short enough for any
// real token, key or password.
const MinLength = 8

// TooShort reports whether value is too short to be masked (surrounding
// white space does not count).
func TooShort(value string) bool { return len(strings.TrimSpace(value)) < MinLength }

// Masker masks the secret values it was given. The zero value and nil are
// empty Maskers, which return every text unchanged. It is safe for
// concurrent use; values are meant to be added at start, but a Masker
// already in use picks up values added later.
type Masker struct {
	mu sync.Mutex // serializes Add
	t  atomic.Pointer[table]
}

// New returns a Masker for values; see Add.
func New(values ...string) *Masker {
	m := &Masker{}
	m.Add(values...)
	return m
}

// Add adds secret values. Empty values and values TooShort are ignored.
func (m *Masker) Add(values ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.t.Load()
	var all []string
	if old != nil {
		all = slices.Clone(old.values)
	}
	added := false
	for _, v := range values {
		if !TooShort(v) && !slices.Contains(all, v) {
			all = append(all, v)
			added = true
		}
	}
	if added {
		m.t.Store(newTable(all))
	}
}

// Len returns how many values the Masker masks.
func (m *Masker) Len() int {
	return len(m.table().values)
}

// Mask returns s with every secret value replaced by Placeholder. Where
// values overlap, the whole stretch they cover is replaced once.
func (m *Masker) Mask(s string) string { return m.table().mask(s) }

// Contains reports whether s holds a secret value.
func (m *Masker) Contains(s string) bool { return m.table().contains(s) }

// table returns the current table; never nil.
func (m *Masker) table() *table {
	if m == nil {
		return &emptyTable
	}
	if t := m.t.Load(); t != nil {
		return t
	}
	return &emptyTable
}

var emptyTable table

// table is an immutable set of patterns: every form of every value.
type table struct {
	values []string
	// patterns are every form of every value, longest first.
	patterns []string
	// pairs has a bit set for each pair of bytes a pattern starts with,
	// the cheap test made at every position of a text.
	pairs [1 << 16 / 64]uint64
	// byPair lists the patterns by the pair of bytes they start with,
	// longest first, so that the first to match at a position is the
	// longest.
	byPair map[uint16][]string
	// first has a mark for each byte a pattern starts with, and only is
	// that byte when there is one (else -1): a text is searched for
	// those bytes first, most of it in large strides.
	first [256]bool
	only  int
}

func newTable(values []string) *table {
	t := &table{values: values, byPair: map[uint16][]string{}}
	seen := map[string]bool{}
	var patterns []string
	for _, v := range values {
		var all []string
		for _, part := range append([]string{v}, urlParts(v)...) {
			all = append(all, forms(part)...)
		}
		for _, f := range all {
			if len(f) >= MinLength && !seen[f] {
				seen[f] = true
				patterns = append(patterns, f)
			}
		}
	}
	slices.SortStableFunc(patterns, func(a, b string) int { return len(b) - len(a) })
	t.patterns = patterns
	firsts := 0
	for _, p := range patterns {
		k := pair(p, 0)
		t.pairs[k/64] |= 1 << (k % 64)
		t.byPair[k] = append(t.byPair[k], p)
		if !t.first[p[0]] {
			t.first[p[0]] = true
			firsts++
			t.only = int(p[0])
		}
	}
	if firsts != 1 {
		t.only = -1
	}
	return t
}

// next returns the first position of s at or after i where a pattern may
// start, or len(s): with one byte that patterns start with, the search
// for it takes the text in strides; with more, a byte at a time, still
// cheaper than testing the pair at every position.
func (t *table) next(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	if t.only >= 0 {
		j := strings.IndexByte(s[i:], byte(t.only))
		if j < 0 {
			return len(s)
		}
		return i + j
	}
	for i < len(s) && !t.first[s[i]] {
		i++
	}
	return i
}

// pair returns the two bytes at s[i:] as one number.
func pair(s string, i int) uint16 { return uint16(s[i])<<8 | uint16(s[i+1]) }

// forms returns the ways the agent may write v: as is, trimmed, and
// escaped as JSON (with and without HTML escaping, as encoding/json writes
// it), as a Go string (%q and %+q, which errors use) or with only its
// control characters escaped (as the CLI prints text), once or twice
// (JSON in a JSON string, a response body quoted in an error); escaped as
// a URL's query, path, path segment or user info, as net/url writes them
// and as html/template writes a value in a link; and each of those as
// HTML (html.EscapeString; html/template, which escapes '+' too; escaping
// only '&', '<' and '>', as Slack does; and HTMLText, as the pull-request
// comment's elements do) or in a Markdown table cell (MarkdownCell, and
// inside a code span, where a backtick becomes a quote).
func forms(v string) []string {
	bases := []string{v}
	if t := strings.TrimSpace(v); t != v && t != "" {
		bases = append(bases, t)
	}
	var out []string
	for _, b := range bases {
		texts := []string{b}
		for _, once := range stringEscapes {
			e := once(b)
			texts = append(texts, e)
			for _, twice := range stringEscapes {
				texts = append(texts, twice(e))
			}
		}
		for _, u := range urlForms(b) {
			texts = append(texts, u, jsonString(u, true))
		}
		for _, e := range texts {
			for _, outer := range outerEscapes {
				out = append(out, outer(e))
			}
		}
	}
	return out
}

// stringEscapes are the ways a value is escaped inside a quoted string.
var stringEscapes = []func(string) string{
	func(s string) string { return jsonString(s, true) },
	func(s string) string { return jsonString(s, false) },
	func(s string) string { return unquote(strconv.Quote(s)) },
	func(s string) string { return unquote(strconv.QuoteToASCII(s)) },
	escapeControl,
}

// escapeControl is s with control characters, line separators and
// bidirectional overrides replaced by their Go escapes and the rest as it
// is, as the CLI's tables and problem messages print text
// (manifest.EscapeControl).
func escapeControl(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || (r >= '\u202a' && r <= '\u202e') ||
			(r >= '\u2066' && r <= '\u2069') || r == utf8.RuneError {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// outerEscapes are the ways text is escaped for the page, message or
// comment it is put in.
var outerEscapes = []func(string) string{
	func(s string) string { return s },
	html.EscapeString,
	templateText,
	htmlMinimal.Replace,
	HTMLText,
	MarkdownCell,
	func(s string) string { return strings.ReplaceAll(MarkdownCell(s), "`", "'") },
}

// templateText is s as html/template writes it in text and in quoted
// attributes.
func templateText(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(html.EscapeString(s), "+", "&#43;"), "\x00", "\uFFFD")
}

var htmlMinimal = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// urlForms are s escaped as the parts of a URL, as net/url and
// html/template write them.
func urlForms(s string) []string {
	password := strings.TrimPrefix(url.UserPassword("u", s).String(), "u:")
	return []string{url.QueryEscape(s), url.PathEscape(s), (&url.URL{Path: "/" + s}).EscapedPath()[1:],
		url.User(s).String(), password, templateURL(urlPathTemplate, s), templateURL(urlQueryTemplate, s)}
}

var (
	urlPathTemplate  = template.Must(template.New("").Parse(`<a href="/{{.}}">`))
	urlQueryTemplate = template.Must(template.New("").Parse(`<a href="/?{{.}}">`))
)

// templateURL is s as html/template writes it in a link's path or query,
// without the text around it.
func templateURL(t *template.Template, s string) string {
	var b strings.Builder
	if err := t.Execute(&b, s); err != nil {
		return s
	}
	out := b.String()
	const prefix, suffix = `<a href="/`, `">`
	out = strings.TrimSuffix(strings.TrimPrefix(out, prefix), suffix)
	return strings.TrimPrefix(out, "?")
}

// jsonString is s as encoding/json writes it inside quotes.
func jsonString(s string, escapeHTML bool) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(s); err != nil {
		return s // a string always encodes
	}
	return unquote(strings.TrimSuffix(b.String(), "\n"))
}

func unquote(q string) string { return q[1 : len(q)-1] }

func (t *table) empty() bool { return len(t.values) == 0 }

// candidate reports whether a pattern may start at s[i]: the test made at
// every position, kept small enough to be inlined.
func (t *table) candidate(s string, i int) bool {
	k := pair(s, i)
	return t.pairs[k/64]&(1<<(k%64)) != 0
}

// match returns the end of the longest pattern that starts at s[i], or -1.
func (t *table) match(s string, i int) int {
	for _, p := range t.byPair[pair(s, i)] {
		if strings.HasPrefix(s[i:], p) {
			return i + len(p)
		}
	}
	return -1
}

func (t *table) contains(s string) bool {
	if t.empty() {
		return false
	}
	// Every pattern is at least MinLength long.
	for i := t.next(s, 0); i+MinLength <= len(s); i = t.next(s, i+1) {
		if t.candidate(s, i) && t.match(s, i) >= 0 {
			return true
		}
	}
	return false
}

func (t *table) mask(s string) string {
	if t.empty() {
		return s
	}
	var b strings.Builder
	last := 0           // s[:last] is written or replaced
	start, end := 0, -1 // the stretch being replaced, while end >= 0
	for i := t.next(s, 0); i+MinLength <= len(s); i = t.next(s, i+1) {
		if !t.candidate(s, i) {
			continue
		}
		e := t.match(s, i)
		switch {
		case e < 0:
			continue
		case end >= 0 && i < end:
			// Overlaps the stretch: extend it, so that no part of either
			// value is left.
			end = max(end, e)
			continue
		case end >= 0:
			b.WriteString(s[last:start])
			b.WriteString(Placeholder)
			last = end
		default:
			b.Grow(len(s))
		}
		start, end = i, e
	}
	if end < 0 {
		return s
	}
	b.WriteString(s[last:start])
	b.WriteString(Placeholder)
	b.WriteString(s[end:])
	return b.String()
}
