package postgres

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/store"
)

// decoded is what encoding/json makes of the array s: its elements as
// text, or false when s is not valid JSON.
func decoded(s string) ([]string, bool) {
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, false
	}
	out := make([]string, len(raw))
	for i, r := range raw {
		out[i] = string(r)
	}
	return out, true
}

func TestSplitArray(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
		ok   bool
	}{
		{`[]`, []string{}, true},
		{`[ ]`, []string{}, true},
		{`[{"id" : 1}]`, []string{`{"id" : 1}`}, true},
		{`[{"id" : 1},{"id" : 2}]`, []string{`{"id" : 1}`, `{"id" : 2}`}, true},
		{`[ {"id" : 1} , {"id" : 2} ]`, []string{`{"id" : 1}`, `{"id" : 2}`}, true},
		// Separators and brackets inside strings, escaped quotes.
		{`[{"m" : "a, b ] } [ {"},{"m" : "say \"hi\", ]"}]`, []string{`{"m" : "a, b ] } [ {"}`, `{"m" : "say \"hi\", ]"}`}, true},
		{`[{"m" : "ends in a backslash \\"},{"id" : 2}]`, []string{`{"m" : "ends in a backslash \\"}`, `{"id" : 2}`}, true},
		{`[{"a" : [1, 2], "b" : {"c" : [3]}}]`, []string{`{"a" : [1, 2], "b" : {"c" : [3]}}`}, true},
		// Not arrays whose elements close.
		{`[{"id" : 1}`, nil, false},
		{`[{"id" : 1}]]`, nil, false},
		{`[{"id" : 1}] x`, nil, false},
		{`[{"id" : 1},]`, nil, false},
		{`[,{"id" : 1}]`, nil, false},
		{`[{"m" : "open]`, nil, false},
		{`[{"id" : 1}}]`, nil, false},
		{`{"id" : 1}`, nil, false},
		{`[`, nil, false},
	}
	for _, tt := range tests {
		got, ok := splitArray(tt.in)
		if ok != tt.ok || (ok && !slices.Equal(got, tt.want)) {
			t.Errorf("splitArray(%s) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
		// Where the input is valid JSON, encoding/json agrees.
		if want, valid := decoded(tt.in); valid && (!ok || !slices.Equal(got, want)) {
			t.Errorf("splitArray(%s) = %q, %v; encoding/json reads %q", tt.in, got, ok, want)
		}
	}
}

// TestSplitArrayAgreesWithDecoding builds arrays of events with hostile
// messages and checks that every one splits as encoding/json reads it.
func TestSplitArrayAgreesWithDecoding(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", ",", "]", "[", "{", "}", `"`, `\`, " ", "é", "\n", "\u2028", "<>&"}
	for range 2000 {
		n := 1 + rng.IntN(5)
		events := make([]string, n)
		for i := range events {
			var msg strings.Builder
			for range rng.IntN(12) {
				msg.WriteString(pieces[rng.IntN(len(pieces))])
			}
			b, err := json.Marshal(store.StatusEvent{ID: int64(i + 1), Kind: "Widget", Name: "w", Message: msg.String()})
			if err != nil {
				t.Fatal(err)
			}
			events[i] = string(b)
		}
		in := "[" + strings.Join(events, ",") + "]"
		got, ok := splitArray(in)
		if !ok || !slices.Equal(got, events) {
			t.Fatalf("splitArray(%s) = %q, %v; want %q", in, got, ok, events)
		}
		if got := splitPayload(store.TopicStatus, in); !slices.Equal(got, events) {
			t.Fatalf("splitPayload(%s) = %q", in, got)
		}
	}
}

func BenchmarkSplitPayload(b *testing.B) {
	ev := `{"id" : 12345, "kind" : "Widget", "namespace" : "default", "name" : "widget-12345", "source" : "infra", ` +
		`"status" : "ready", "status_message" : "applied", "generation" : 1, "observed_generation" : 1, "deleted" : false, "suspended" : false}`
	payload := "[" + strings.Repeat(ev+",", 19) + ev + "]"
	b.ReportAllocs()
	for b.Loop() {
		if len(splitPayload(store.TopicStatus, payload)) != 20 {
			b.Fatal("wrong split")
		}
	}
}
