package exec

import (
	"strconv"
	"strings"
	"testing"
)

// leakedPiece returns the first piece of secret, 6 bytes long, that text
// holds, or "".
func leakedPiece(text, secret string) string {
	for i := 0; i+6 <= len(secret); i++ {
		if strings.Contains(text, secret[i:i+6]) {
			return secret[i : i+6]
		}
	}
	return ""
}

// TestSecretCutAtALimit has a command print its passEnv secret where the
// action cuts what it keeps: the excerpt of a stdout that is not JSON, a
// progress line longer than a progress message may be, and the start of the
// stderr tail an error quotes. No piece of the secret is left in the error,
// the progress or the message.
func TestSecretCutAtALimit(t *testing.T) {
	const secret = "S3cr3t-Tok3n-0123456789ABCDEF"
	dir := t.TempDir()
	pad := func(n int, c string) string { return "printf '%" + strconv.Itoa(n) + "s' '' | tr ' ' " + c + "\n" }
	cases := []struct {
		name, script string
	}{
		{"stdout excerpt", pad(70, "x") + `printf '%s not json' "$TOKEN"` + "\n"},
		{"progress line", "{\n" + pad(maxProgressLine-10, "x") + `printf '%s\n' "$TOKEN"` + "\n} >&2\n"},
		{"stderr tail", "{\n" + `printf '%s' "$TOKEN"` + "\n" + pad(stderrTail-10, "y") + "} >&2\nexit 1\n"},
	}
	scripts := map[string]string{}
	for i, c := range cases {
		scripts[c.name] = writeScript(t, dir, "cut"+strconv.Itoa(i)+".sh", c.script)
	}
	t.Parallel()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			req := request()
			req.Reporter = rec
			a := mustAction(t, map[string]any{"command": []string{scripts[c.name]}, "passEnv": []string{"TOKEN"}},
				func(k string) (string, bool) { return secret, k == "TOKEN" })
			res, err := a.Apply(t.Context(), req)
			var shown []string
			if err != nil {
				shown = append(shown, err.Error())
			}
			if res != nil {
				shown = append(shown, res.Message)
			}
			shown = append(shown, rec.lines()...)
			if len(strings.Join(shown, "")) < 60 {
				t.Fatalf("the action showed too little for the test to mean anything: %q", shown)
			}
			for _, s := range shown {
				if p := leakedPiece(s, secret); p != "" {
					t.Errorf("%q holds %q, a piece of the secret", s, p)
				}
			}
		})
	}
}
