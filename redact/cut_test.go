package redact_test

import (
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/redact"
)

// TestMaskCut masks what a cut left of a value at the edge of a text, in
// every form the agent writes it in, wherever the cut falls; pieces shorter
// than MinPiece and text away from the edge are left as they are.
func TestMaskCut(t *testing.T) {
	t.Parallel()
	m := redact.New(nastySecrets...)
	for name, encode := range agentEncodings(t) {
		for _, secret := range nastySecrets {
			form := encode(secret)
			for cut := redact.MinPiece; cut < len(form); cut++ {
				// The text ended inside the value: its first cut bytes are left.
				tail := "before " + form[:cut]
				if got, want := m.MaskCut(tail, false, true), "before ***"; got != want {
					t.Errorf("%s of %q cut after %d bytes: MaskCut(%q) = %q, want %q", name, secret, cut, tail, got, want)
				}
				// The text began inside the value: its last bytes are left.
				head := form[len(form)-cut:] + " after"
				if got, want := m.MaskCut(head, true, false), "*** after"; got != want {
					t.Errorf("%s of %q cut before its last %d bytes: MaskCut(%q) = %q, want %q", name, secret, cut, head, got, want)
				}
			}
			whole := form + " in the middle " + form
			if got, want := m.MaskCut(whole, true, true), "*** in the middle ***"; got != want {
				t.Errorf("%s of %q: MaskCut(%q) = %q, want %q", name, secret, whole, got, want)
			}
		}
	}
	for _, keep := range []string{"pa\"", "ordinary text", strings.Repeat("x", 100)} {
		if got := m.MaskCut(keep, true, true); got != keep {
			t.Errorf("MaskCut(%q) = %q: text that holds no piece of a value was changed", keep, got)
		}
	}
	if got := redact.New().MaskCut("pa\"ss&w<o", true, true); got != "pa\"ss&w<o" {
		t.Errorf("an empty masker changed text: %q", got)
	}
}
