package redact

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unsafe"
)

// attackValues are sets of secrets whose first bytes, or the first bytes
// of their escaped forms, are the ones a search for the bytes patterns
// start with could get wrong.
var attackValues = [][]string{
	{`"quoted-secret-1`},                        // JSON form starts with \"
	{`\back\slash-secret`},                      // escaped form starts with \\
	{`<script>secret-x`},                        // \u003c, &lt;
	{`&amp-secret-val`},                         // \u0026, &amp;amp;
	{`%41%42secret99`},                          // %2541 in a URL
	{"ésecret-unicode"},                         // UTF-8 lead byte; \u00e9
	{"日本語のひみつ"},                                 // three-byte runes; \u65e5
	{"  padded-secret  "},                       // trimmed form starts elsewhere
	{"\x00nul-secret-value"},                    // \u0000, \x00, \uFFFD
	{"\u2028line-sep-secret"},                   // escaped as \u2028
	{"+plus+secret+val"},                        // &#43; in html/template
	{"'tick`secret`val"},                        // Markdown code span: ` becomes '
	{"aaaaaaaa1x", "aaaaaaaa2y", "aaaaaaaabz"},  // one first byte, many values
	{"abcdefgh12", "gh12345678xyz", "2345qwer"}, // overlapping
	{"ghp_0123456789abcdef", "\"ghp_quoted\"x", "<ghp_lt>xxxxx", "é-ghp-lead"},
	{"user:p@ss w0rd@host/x", "https://u:s3cr3tpass@example.com/p?q=1"},
}

// everyPosition is t testing every position, as before the search for
// the bytes patterns start with.
func everyPosition(values []string) *table {
	e := newTable(values)
	e.only = -1
	for i := range e.first {
		e.first[i] = true
	}
	return e
}

// pieces returns the pieces of 4 bytes or more of v found in s.
func pieces(v, s string) []string {
	var out []string
	for i := 0; i+4 <= len(v); i++ {
		if strings.Contains(s, v[i:i+4]) {
			out = append(out, v[i:i+4])
		}
	}
	return out
}

// TestAttackFirstBytes masks texts made of whole forms of the values
// (every escape the Masker knows), glued by single bytes that appear in
// escapes, NULs and UTF-8 lead bytes, at the start, the end and next to
// each other: the fast search must give what testing every position gives,
// and no piece of 4 bytes of a value may be left.
func TestAttackFirstBytes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 5))
	glue := []string{"", "", "x", "\"", "\\", "<", "&", "%", " ", "\x00", "\xc3", "\xe6", "u", "\n", ":"}
	for _, values := range attackValues {
		fast, every := newTable(values), everyPosition(values)
		if len(fast.patterns) == 0 {
			t.Fatalf("values %q: no patterns", values)
		}
		// An escaped form starting with another byte than the raw value
		// must turn the single-byte stride off.
		firsts := map[byte]bool{}
		for _, p := range fast.patterns {
			firsts[p[0]] = true
			if !fast.first[p[0]] {
				t.Fatalf("values %q: pattern %q starts with an unmarked byte", values, p)
			}
		}
		if (len(firsts) == 1) != (fast.only >= 0) || (fast.only >= 0 && !firsts[byte(fast.only)]) {
			t.Fatalf("values %q: only = %d with first bytes %v", values, fast.only, firsts)
		}
		for round := range 400 {
			var b strings.Builder
			for range 1 + rng.IntN(6) {
				b.WriteString(glue[rng.IntN(len(glue))])
				b.WriteString(fast.patterns[rng.IntN(len(fast.patterns))])
			}
			if rng.IntN(2) == 0 {
				b.WriteString(glue[rng.IntN(len(glue))])
			}
			text := b.String()
			got, want := fast.mask(text), every.mask(text)
			if got != want {
				t.Fatalf("values %q round %d: text %q\nmasked %q\nwant   %q", values, round, text, got, want)
			}
			if !fast.contains(text) || !every.contains(text) {
				t.Fatalf("values %q round %d: text %q not said to contain a secret", values, round, text)
			}
			for _, v := range values {
				if p := pieces(strings.TrimSpace(v), got); len(p) > 0 {
					t.Fatalf("values %q round %d: text %q masked %q keeps %q", values, round, text, got, p)
				}
			}
		}
	}
}

// TestAttackShortTexts masks every text of 0..MinLength+1 bytes cut from
// around a value's forms: nothing shorter than a value is taken for it,
// nothing panics, and the fast search agrees with testing every position.
func TestAttackShortTexts(t *testing.T) {
	t.Parallel()
	for _, values := range attackValues {
		fast, every := newTable(values), everyPosition(values)
		for _, p := range fast.patterns {
			s := "\x00" + p + "\x00"
			for i := range s {
				for j := i; j <= len(s) && j-i <= MinLength+1; j++ {
					text := s[i:j]
					if got, want := fast.mask(text), every.mask(text); got != want {
						t.Fatalf("values %q: %q masked %q, want %q", values, text, got, want)
					}
					if fast.contains(text) != every.contains(text) {
						t.Fatalf("values %q: contains(%q) differs", values, text)
					}
				}
			}
		}
	}
}

// spyWriter records every slice written to it, without copying, as a
// writer that keeps what it is given would.
type spyWriter struct {
	http.ResponseWriter
	writes [][]byte
}

func (s *spyWriter) Write(p []byte) (int, error) {
	s.writes = append(s.writes, p)
	return s.ResponseWriter.Write(p)
}

// TestAttackHTTPWritesCopies writes, through the masking writer, bodies
// with and without a secret, at the start, the end, alone, of every length
// up to MinLength, then scribbles over them once Write returned: a masked
// body reaches the writer below as a copy, never p, the client gets what
// was masked at the time of the Write, and Write reports len(p).
func TestAttackHTTPWritesCopies(t *testing.T) {
	t.Parallel()
	const secret = "\"s3cr3t<value>&é"
	m := New(secret)
	enc := jsonString(secret, true)
	bodies := []string{secret, "x" + secret, secret + "x", enc, "a" + enc + "b" + secret,
		"nothing secret here", "\x00\x00\x00\x00\x00\x00\x00\x00\x00", ""}
	for n := 0; n <= MinLength; n++ {
		bodies = append(bodies, secret[:n], enc[:n])
	}
	for _, body := range bodies {
		rec := httptest.NewRecorder()
		spy := &spyWriter{ResponseWriter: rec}
		var ps [][]byte
		m.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Written twice, from one buffer the handler reuses.
			buf := []byte(body)
			for range 2 {
				p := buf
				ps = append(ps, p)
				n, err := w.Write(p)
				if err != nil || n != len(p) {
					t.Errorf("Write(%q) = %d, %v", p, n, err)
				}
				if string(p) != body {
					t.Errorf("Write changed what it was given: %q, was %q", p, body)
				}
				for i := range buf {
					buf[i] = 'Z'
				}
				buf = []byte(body)
			}
		})).ServeHTTP(spy, httptest.NewRequest("GET", "/", nil))
		want := m.Mask(body) + m.Mask(body)
		if got := rec.Body.String(); got != want {
			t.Errorf("body %q: client got %q, want %q", body, got, want)
		}
		if (strings.Contains(body, secret) || strings.Contains(body, enc)) && strings.Contains(rec.Body.String(), "s3cr3t") {
			t.Errorf("body %q: secret reached the client: %q", body, rec.Body.String())
		}
		masked := m.Mask(body) != body
		for i, w := range spy.writes {
			if len(w) == 0 || i >= len(ps) {
				continue
			}
			same := unsafe.SliceData(w) == unsafe.SliceData(ps[i])
			if masked && same {
				t.Errorf("body %q: a masked write passed p itself", body)
			}
			if !masked && !same {
				t.Errorf("body %q: an unmasked write was copied", body)
			}
		}
	}
}
