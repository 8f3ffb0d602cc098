package redact_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/redact"
)

// NastySecrets hold every character that an encoding the agent applies
// changes: quotes, HTML's and Markdown's specials, a backslash, a newline,
// a percent sign, spaces, a plus, a backtick and non-ASCII letters.
var nastySecrets = []string{
	`pa"ss&w<o>rd-1f`,
	`it's|a\back-slash`,
	"two\nlines-secret",
	`100%-sure secret`,
	"ünïcødé-Geheimnis€",
	"tab\tand+plus=eq",
	"`back`ticks-9f&<",
	`"&<>"-quoted-7`,
}

// render executes an html/template whose only action is {{.}} on s and
// returns what the action wrote, without the text around it.
func render(t *testing.T, before, after, s string) string {
	t.Helper()
	tmpl := template.Must(template.New("").Parse(before + "{{.}}" + after))
	var b bytes.Buffer
	if err := tmpl.Execute(&b, s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, before) || !strings.HasSuffix(out, after) {
		t.Fatalf("template output %q does not keep %q and %q around the value", out, before, after)
	}
	return out[len(before) : len(out)-len(after)]
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func unquoted(q string) string { return q[1 : len(q)-1] }

func jsonTextNoHTML(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}

// agentEncodings are the ways the agent itself writes a value: each the
// way the code that writes it escapes, not the masker's own functions.
func agentEncodings(t *testing.T) map[string]func(string) string {
	return map[string]func(string) string{
		"as is":                     func(s string) string { return s },
		"JSON":                      jsonText,
		"JSON without HTML escapes": jsonTextNoHTML,
		"JSON in JSON":              func(s string) string { return jsonText(jsonText(s)) },
		"Go %q":                     func(s string) string { return unquoted(fmt.Sprintf("%q", s)) },
		"Go %+q":                    func(s string) string { return unquoted(fmt.Sprintf("%+q", s)) },
		"HTML":                      html.EscapeString,
		// Slack's mrkdwn and the pull-request comment's elements escape
		// only these three.
		"HTML, quotes as they are": strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace,
		"html/template text":       func(s string) string { return render(t, "<p>", "</p>", s) },
		"html/template attribute":  func(s string) string { return render(t, `<p title="`, `">`, s) },
		"html/template URL path":   func(s string) string { return render(t, `<a href="/x/`, `">`, s) },
		"html/template URL query":  func(s string) string { return render(t, `<a href="/x?q=`, `">`, s) },
		"html/template JSON":       func(s string) string { return render(t, "<pre>", "</pre>", jsonText(s)) },
		"Markdown table cell":      redact.MarkdownCell,
		"JSON in a Markdown cell": func(s string) string {
			return strings.ReplaceAll(redact.MarkdownCell(jsonText(s)), "`", "'")
		},
		"HTML in a Markdown comment": func(s string) string { return html.EscapeString(s) },
		"URL query":                  url.QueryEscape,
		"URL path segment":           url.PathEscape,
		"URL path":                   func(s string) string { return (&url.URL{Path: "/" + s}).EscapedPath()[1:] },
		"URL password": func(s string) string {
			return strings.TrimPrefix(url.UserPassword("u", s).String(), "u:")
		},
		"URL in JSON":                func(s string) string { return jsonText(url.QueryEscape(s)) },
		"control characters escaped": manifest.EscapeControl,
	}
}

// TestMaskEveryEncoding masks every nasty secret in every form the agent
// writes it in, in the middle of a text: the secret is gone in each, and
// nothing else in the text changes.
func TestMaskEveryEncoding(t *testing.T) {
	t.Parallel()
	m := redact.New(nastySecrets...)
	for name, encode := range agentEncodings(t) {
		for _, secret := range nastySecrets {
			form := encode(secret)
			in := "before " + form + " after"
			if got, want := m.Mask(in), "before *** after"; got != want {
				t.Errorf("%s of %q: Mask(%q) = %q, want %q", name, secret, in, got, want)
			}
			if !m.Contains(in) {
				t.Errorf("%s of %q: Contains(%q) = false", name, secret, in)
			}
		}
	}
}

// TestMaskURLParts masks a secret URL's secret parts on their own, as a
// receiver echoes them (its path in a 404 body, a query value in a log
// line), and leaves its host and ordinary words alone.
func TestMaskURLParts(t *testing.T) {
	t.Parallel()
	const (
		slack   = "https://hooks.slack.com/services/T0AB12CD/B0EF34GH/xYz123SecretToken9"
		webhook = "https://bot:pass-w0rd-secret@hooks.example.com/in/hook-9f8e7d6c5b?token=q-s%26cret-12345&mode=fast"
	)
	m := redact.New(slack, webhook)
	for _, echo := range []string{
		"/services/T0AB12CD/B0EF34GH/xYz123SecretToken9",
		"services/T0AB12CD/B0EF34GH/xYz123SecretToken9",
		"B0EF34GH/xYz123SecretToken9",
		"xYz123SecretToken9",
		"pass-w0rd-secret",
		"/in/hook-9f8e7d6c5b",
		"hook-9f8e7d6c5b",
		"q-s&cret-12345",
		"q-s%26cret-12345",
		"token=q-s%26cret-12345",
		`q-s\u0026cret-12345`,
	} {
		in := `no route for "` + echo + `"`
		if got := m.Mask(in); strings.Contains(got, echo) || !strings.Contains(got, "***") {
			t.Errorf("Mask(%q) = %q: the URL's secret part is not masked", in, got)
		}
	}
	for _, keep := range []string{"services are up", "hooks.slack.com answered", "hooks.example.com", "incoming in mode fast"} {
		if got := m.Mask(keep); got != keep {
			t.Errorf("Mask(%q) = %q: text that is not secret was changed", keep, got)
		}
	}
}

type inner struct {
	Note  string
	Raw   json.RawMessage
	Bytes []byte
	Any   any
	Err   error
	Named revision
}

type revision string

type outer struct {
	Name     string
	Count    int
	Inner    inner
	Ptr      *inner
	List     []inner
	Map      map[string]string
	Array    [2]string
	Nil      *inner
	NilSlice []string
	hidden   string
}

type sliceError struct{ Message string }

func (e *sliceError) Error() string { return e.Message }

// TestMaskValues masks every string a value holds before it is rendered,
// in a copy: the value itself is left as it was.
func TestMaskValues(t *testing.T) {
	t.Parallel()
	const s = `pa"ss&w<o>rd-1f`
	m := redact.New(s)
	in := outer{Name: "a " + s, Count: 3,
		Inner: inner{Note: s, Raw: json.RawMessage(`{"k":"` + jsonText(s) + `","n":1}`), Bytes: []byte("b " + s), Any: "any " + s,
			Err: &sliceError{Message: "failed: " + s}, Named: revision(s)},
		Ptr:    &inner{Note: s, Any: map[string]any{s: []any{s, 1}}},
		List:   []inner{{Note: s}},
		Map:    map[string]string{"k": s, s: "v"},
		Array:  [2]string{s, "x"},
		hidden: s,
	}
	before := fmt.Sprintf("%#v %#v %#v", in, *in.Ptr, in.Inner.Err)
	got := redact.MaskValues(m, in)
	if after := fmt.Sprintf("%#v %#v %#v", in, *in.Ptr, in.Inner.Err); after != before {
		t.Errorf("MaskValues changed its argument:\nbefore %s\nafter  %s", before, after)
	}
	want := outer{Name: "a ***", Count: 3,
		Inner: inner{Note: "***", Raw: json.RawMessage(`{"k":"***","n":1}`), Bytes: []byte("b ***"), Any: "any ***",
			Err: &sliceError{Message: "failed: ***"}, Named: "***"},
		Ptr:    &inner{Note: "***", Any: map[string]any{"***": []any{"***", 1}}},
		List:   []inner{{Note: "***"}},
		Map:    map[string]string{"k": "***", "***": "v"},
		Array:  [2]string{"***", "x"},
		hidden: s, // not reached: unexported
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MaskValues =\n%#v\n%#v\nwant\n%#v\n%#v", got, *got.Ptr, want, *want.Ptr)
	}
	if got.Ptr == in.Ptr || &got.List[0] == &in.List[0] {
		t.Error("MaskValues shares pointers or slices with its argument")
	}
	// A cycle is copied as a cycle.
	type node struct {
		Name string
		Next *node
	}
	n := &node{Name: s}
	n.Next = n
	c := redact.MaskValues(m, n)
	if c.Name != "***" || c.Next != c {
		t.Errorf("cycle: %+v", c)
	}
	// Without secrets the value is returned as it is.
	if p := redact.MaskValues(redact.New(), in.Ptr); p != in.Ptr {
		t.Error("an empty masker copied the value")
	}
}
