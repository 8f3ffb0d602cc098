package redact_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/redact"
)

func TestMask(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"no secrets", nil, "token tok-12345678", "token tok-12345678"},
		{"empty text", []string{"tok-12345678"}, "", ""},
		{"no match", []string{"tok-12345678"}, "tok-1234567 tok-2345678", "tok-1234567 tok-2345678"},
		{"every occurrence", []string{"tok-12345678"}, "tok-12345678 and tok-12345678.", "*** and ***."},
		{"whole text", []string{"tok-12345678"}, "tok-12345678", "***"},
		{"several", []string{"tok-12345678", "pass-abcdefg"}, "a pass-abcdefg b tok-12345678 c", "a *** b *** c"},
		{"overlapping", []string{"abcdefgh12", "gh12345678"}, "xxabcdefgh12345678yy", "xx***yy"},
		{"overlapping, listed the other way", []string{"gh12345678", "abcdefgh12"}, "xxabcdefgh12345678yy", "xx***yy"},
		{"one inside another", []string{"secret-token-1", "secret-token-1-long"}, "[secret-token-1-long] [secret-token-1]", "[***] [***]"},
		{"adjacent", []string{"tok-12345678", "pass-abcdefg"}, "tok-12345678pass-abcdefg", "******"},
		{"too short", []string{"short", "deploy1"}, "short deploy1", "short deploy1"},
		{"trimmed", []string{"tok-12345678\n"}, "token: tok-12345678.", "token: ***."},
		{"JSON-escaped", []string{`pa"ss\word1`}, `{"error":"got pa\"ss\\word1"}`, `{"error":"got ***"}`},
		{"JSON-escaped HTML", []string{"a<b>&c-12345"}, `"a\u003cb\u003e\u0026c-12345"`, `"***"`},
		{"Go-quoted", []string{"line1\tline2"}, `error: "line1\tline2"`, `error: "***"`},
		{"HTML-escaped", []string{`<p4ss&'w"rd+>`}, "<td>&lt;p4ss&amp;&#39;w&#34;rd&#43;&gt;</td>", "<td>***</td>"},
		{"URL-escaped", []string{"p@ss/w0rd?&"}, "https://user:" + url.QueryEscape("p@ss/w0rd?&") + "@host/", "https://user:***@host/"},
		{"URL user info", []string{"p@ss/w0rd:x"}, url.UserPassword("u", "p@ss/w0rd:x").String(), "u:***"},
		{"not UTF-8 text", []string{"tok-12345678"}, "\xff\xfetok-12345678\xff", "\xff\xfe***\xff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := redact.New(tt.secrets...)
			if got := m.Mask(tt.in); got != tt.want {
				t.Errorf("Mask(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got, want := m.Contains(tt.in), tt.in != tt.want; got != want {
				t.Errorf("Contains(%q) = %v, want %v", tt.in, got, want)
			}
		})
	}
}

func TestMaskHTMLTemplate(t *testing.T) {
	t.Parallel()
	// The dashboard writes values through html/template: every form it
	// produces is masked.
	secret := `<p4ss&'w"rd+>`
	tmpl := template.Must(template.New("").Parse(`<p title="{{.}}">{{.}}</p><pre>{{printf "%q" .}}</pre>`))
	var b bytes.Buffer
	if err := tmpl.Execute(&b, secret); err != nil {
		t.Fatal(err)
	}
	got := redact.New(secret).Mask(b.String())
	if want := `<p title="***">***</p><pre>&#34;***&#34;</pre>`; got != want {
		t.Errorf("masked %s\ngot  %s\nwant %s", b.String(), got, want)
	}
}

func TestEmptyAndNilMaskers(t *testing.T) {
	t.Parallel()
	for name, m := range map[string]*redact.Masker{"nil": nil, "zero": {}, "only short values": redact.New("", "abc", "   x   ")} {
		if got := m.Mask("abc x"); got != "abc x" {
			t.Errorf("%s: Mask = %q", name, got)
		}
		if m.Contains("abc x") || m.Len() != 0 {
			t.Errorf("%s: Contains or Len say it holds something", name)
		}
		raw := json.RawMessage(`{"abc": "x"}`)
		if got := m.MaskJSON(raw); &got[0] != &raw[0] {
			t.Errorf("%s: MaskJSON copied its input", name)
		}
	}
}

func TestTooShort(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"": true, "1234567": true, " 1234567 ": true, "12345678": false, "\t12345678\n": false} {
		if got := redact.TooShort(v); got != want {
			t.Errorf("TooShort(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestAddLater(t *testing.T) {
	t.Parallel()
	m := redact.New("tok-12345678")
	log := &bytes.Buffer{}
	logger := slog.New(m.Handler(slog.NewTextHandler(log, nil))).With("early", "pass-abcdefg")
	m.Add("pass-abcdefg", "tok-12345678")
	if m.Len() != 2 {
		t.Errorf("Len = %d, want 2 (a value added twice counts once)", m.Len())
	}
	if got := m.Mask("tok-12345678 pass-abcdefg"); got != "*** ***" {
		t.Errorf("Mask = %q", got)
	}
	logger.Info("x")
	if strings.Contains(log.String(), "pass-abcdefg") {
		t.Errorf("an attribute given to With before the value was added is not masked:\n%s", log)
	}
}

func TestMaskJSON(t *testing.T) {
	t.Parallel()
	secrets := []string{"tok-12345678", `q"uote\-secret`, "12345678901"}
	tests := []struct {
		name, in, want string
	}{
		{"value", `{"token": "tok-12345678"}`, `{"token": "***"}`},
		{"key", `{"tok-12345678": 1, "b": [1, 2]}`, `{"***": 1, "b": [1, 2]}`},
		{"inside a longer string, layout kept", "{\n  \"msg\": \"use tok-12345678 now\",\n  \"n\": 3\n}", "{\n  \"msg\": \"use *** now\",\n  \"n\": 3\n}"},
		{"escaped in the document", `["\u0074ok-12345678"]`, `["***"]`},
		{"value with a quote", `{"v": "q\"uote\\-secret"}`, `{"v": "***"}`},
		{"JSON inside a string", `{"body": "{\"t\":\"q\\\"uote\\\\-secret\"}"}`, `{"body": "{\"t\":\"***\"}"}`},
		{"numbers are not text", `{"n": 12345678901, "s": "12345678901"}`, `{"n": 12345678901, "s": "***"}`},
		{"nothing secret", `{"a": "b"}`, `{"a": "b"}`},
		{"not JSON", `token=tok-12345678 {`, `token=*** {`},
		{"string across structure", `["tok-1234", "5678"]`, `["tok-1234", "5678"]`},
	}
	m := redact.New(secrets...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := string(m.MaskJSON(json.RawMessage(tt.in)))
			if got != tt.want {
				t.Errorf("MaskJSON(%s)\ngot  %s\nwant %s", tt.in, got, tt.want)
			}
			if json.Valid([]byte(tt.in)) && !json.Valid([]byte(got)) {
				t.Errorf("MaskJSON(%s) = %s: not valid JSON", tt.in, got)
			}
		})
	}
}

// TestMaskJSONStaysValid masks secrets that look like JSON syntax, placed
// everywhere in documents, and checks every result is valid JSON holding
// none of them.
func TestMaskJSONStaysValid(t *testing.T) {
	t.Parallel()
	secrets := []string{`", "b": "`, `true, "x`, `}]}{[{"a`, `\u0000\n\t"\\`, `12345678`, "\u2028line\u2029sep"}
	m := redact.New(secrets...)
	for i, s := range secrets {
		for _, doc := range []any{
			map[string]any{s: s, "k": []any{s, 1, true, nil, "pre" + s + "post"}},
			[]any{map[string]any{"nested": map[string]any{"deep" + s: s + s}}},
			s,
		} {
			raw, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			got := m.MaskJSON(raw)
			if !json.Valid(got) {
				t.Fatalf("secret %d: MaskJSON(%s) = %s: not valid JSON", i, raw, got)
			}
			var back any
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			if text := fmt.Sprint(back); m.Contains(text) || strings.Contains(string(got), s) {
				t.Errorf("secret %d: MaskJSON(%s) = %s still holds a secret", i, raw, got)
			}
		}
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	const secret = "tok-12345678"
	type settings struct{ Token string }
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			var h slog.Handler = slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})
			if format == "json" {
				h = slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})
			}
			log := slog.New(redact.New(secret).Handler(h))
			log.With("with", "w "+secret).WithGroup("g").With("in-group", secret).
				Info("message "+secret, "string", secret, secret, "as key",
					"error", fmt.Errorf("wrapped: %w", errors.New("bad "+secret)),
					"bytes", []byte(secret), "raw", json.RawMessage(`{"t":"`+secret+`"}`),
					"struct", settings{Token: secret}, "pointer", &settings{Token: secret},
					"stringer", stringer(secret), "valuer", valuer(secret), "ref", ref{Name: "db", Token: secret},
					"text", textMarshaler(secret),
					slog.Group("group", "nested", secret, slog.Group("deeper", "x", secret)),
					"number", 12345678)
			log.WithGroup("empty").Debug("debug", "d", secret)
			got := out.String()
			if strings.Contains(got, secret) {
				t.Errorf("the secret is in the log:\n%s", got)
			}
			for _, want := range []string{"message ***", "12345678", "with", "in-group", "nested", "deeper", "debug"} {
				if !strings.Contains(got, want) {
					t.Errorf("the log lacks %q:\n%s", want, got)
				}
			}
			if format == "json" {
				for line := range strings.Lines(got) {
					if !json.Valid([]byte(line)) {
						t.Errorf("not a JSON line: %s", line)
					}
				}
				// Groups stay groups: the record's attributes are inside g.
				if !strings.Contains(got, `"g":{"in-group":"***","string":"***"`) {
					t.Errorf("the group g does not hold its attributes:\n%s", got)
				}
			}
		})
	}
}

type stringer string

func (s stringer) String() string { return "stringer " + string(s) }

// ref is a Stringer whose text leaves out a field that JSON shows.
type ref struct{ Name, Token string }

func (r ref) String() string { return "ref " + r.Name }

// textMarshaler has a text, which the text handler writes, other than its
// %+v.
type textMarshaler string

func (m textMarshaler) MarshalText() ([]byte, error) { return []byte("text " + string(m)), nil }

func (m textMarshaler) String() string { return "a text marshaler" }

type valuer string

func (v valuer) LogValue() slog.Value { return slog.StringValue("valuer " + string(v)) }

func TestHandlerKeepsValuesWithoutSecrets(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	log := slog.New(redact.New("tok-12345678").Handler(slog.NewJSONHandler(&out, nil)))
	log.Info("m", "struct", struct{ A int }{A: 1}, "err", errors.New("plain"), "n", 3)
	if want := `"struct":{"A":1},"err":"plain","n":3}`; !strings.Contains(out.String(), want) {
		t.Errorf("log = %s, want it to contain %s", out.String(), want)
	}
}

func TestHTTP(t *testing.T) {
	t.Parallel()
	const secret = "tok-12345678"
	masking := false
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Go's client asks for gzip.
		if r.Header.Get("Accept-Encoding") != "" && masking {
			t.Error("the handler may compress its response: masking would not see the text")
		}
		body := `{"error": "bad token ` + secret + `"}`
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Header().Set("X-Echo", secret)
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, body)
		if _, ok := w.(http.Flusher); !ok {
			t.Error("the masking writer is not an http.Flusher")
		}
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush through the masking writer: %v", err)
		}
		fmt.Fprint(w, "\nmore "+secret)
	})
	for name, m := range map[string]*redact.Masker{"with secrets": redact.New(secret), "without": redact.New()} {
		masking = m.Len() > 0
		srv := httptest.NewServer(m.HTTP(next))
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		srv.Close()
		got := fmt.Sprintf("%d %s %s", resp.StatusCode, resp.Header.Get("X-Echo"), b.String())
		want := `401 *** {"error": "bad token ***"}` + "\nmore ***"
		if m.Len() == 0 {
			want = strings.ReplaceAll(want, "***", secret)
			// Without secrets the response is untouched: the handler's
			// Content-Length cut the body it declared.
			want = strings.TrimSuffix(want, "\nmore "+secret)
		}
		if got != want {
			t.Errorf("%s: response %q, want %q", name, got, want)
		}
	}
}

// The benchmarks mask a 16 KiB text, about what a status message, an
// outputs document or a dashboard page holds, with no secret, with 32
// secrets (in their 6 or so forms each) that it does not hold, and with
// 32 secrets that it holds.
func benchText(secrets []string) string {
	var b strings.Builder
	for i := 0; b.Len() < 16<<10; i++ {
		fmt.Fprintf(&b, `{"line": %d, "message": "reconciled resource web-%d with action deploy: ok", "url": "https://example.com/x?y=%d"}`+"\n", i, i, i)
		if secrets != nil && i%20 == 0 {
			b.WriteString(secrets[i%len(secrets)])
		}
	}
	return b.String()
}

func benchSecrets(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("ghp_%032x", i*7919+1))
	}
	return out
}

// variedSecrets are n secrets that start with 26 different letters.
func variedSecrets(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%c%031x", 'a'+i%26, i*7919+1))
	}
	return out
}

func BenchmarkMask(b *testing.B) {
	secrets := benchSecrets(32)
	for _, bc := range []struct {
		name    string
		masker  *redact.Masker
		text    string
		replace bool
	}{
		{"no secrets", redact.New(), benchText(nil), false},
		{"32 secrets, none in the text", redact.New(secrets...), benchText(nil), false},
		{"32 secrets of 26 first bytes, none in the text", redact.New(variedSecrets(32)...), benchText(nil), false},
		{"32 secrets in the text", redact.New(secrets...), benchText(secrets), true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				if got := bc.masker.Mask(bc.text); (got != bc.text) != bc.replace {
					b.Fatal("unexpected result")
				}
			}
		})
	}
	// strings.Replacer with the same 32 values, raw form only, for scale.
	b.Run("strings.Replacer, 32 secrets, none in the text", func(b *testing.B) {
		var args []string
		for _, s := range secrets {
			args = append(args, s, redact.Placeholder)
		}
		r := strings.NewReplacer(args...)
		text := benchText(nil)
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		for b.Loop() {
			r.Replace(text)
		}
	})
}

func BenchmarkMaskJSON(b *testing.B) {
	secrets := benchSecrets(32)
	var doc []map[string]string
	for i := range 100 {
		doc = append(doc, map[string]string{"name": fmt.Sprintf("web-%d", i), "url": fmt.Sprintf("https://example.com/%d?a=\"b\"", i)})
	}
	raw, _ := json.Marshal(doc)
	for _, bc := range []struct {
		name   string
		masker *redact.Masker
	}{{"no secrets", redact.New()}, {"32 secrets", redact.New(secrets...)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				bc.masker.MaskJSON(raw)
			}
		})
	}
}
