package store_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

func TestStatusEventID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload string
		want    int64
		wantErr bool
	}{
		{name: "as PostgreSQL writes it", payload: `{"id" : 42, "kind" : "Widget", "status" : "ready"}`, want: 42},
		{name: "as SQLite writes it", payload: `{"id":7,"kind":"Widget","status":"ready"}`, want: 7},
		{name: "id not first", payload: `{"kind":"Widget","id":9}`, want: 9},
		{name: "id as a string is not an id", payload: `{"id":"9","kind":"Widget"}`, wantErr: true},
		{name: "negative id decoded in full", payload: `{"id":-3,"kind":"Widget"}`, want: -3},
		{name: "id alone", payload: `{"id":5}`, want: 5},
		{name: "too large for an int64", payload: `{"id":99999999999999999999,"kind":"Widget"}`, wantErr: true},
		{name: "garbage after the id", payload: `{"id":12x,"kind":"Widget"}`, wantErr: true},
		{name: "not JSON", payload: `{"id":12, oops`, want: 12},
		{name: "empty", payload: ``, wantErr: true},
		{name: "an array", payload: `[{"id":1}]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := store.StatusEventID(tt.payload)
			if (err != nil) != tt.wantErr {
				t.Fatalf("StatusEventID(%q) error %v, want error %v", tt.payload, err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Fatalf("StatusEventID(%q) = %d, want %d", tt.payload, got, tt.want)
			}
			if tt.wantErr {
				return
			}
			// Where the whole event can be decoded, both agree.
			if ev, err := store.ParseStatusEvent(tt.payload); err == nil && ev.ID != got {
				t.Fatalf("StatusEventID(%q) = %d, but the event's id is %d", tt.payload, got, ev.ID)
			}
		})
	}
}

func BenchmarkStatusEventID(b *testing.B) {
	const payload = `{"id" : 4242, "kind" : "Widget", "namespace" : "default", "name" : "w-4242", "source" : "infra", ` +
		`"status" : "ready", "status_message" : "applied", "generation" : 3, "observed_generation" : 3, "deleted" : false, "suspended" : false}`
	b.Run("id", func(b *testing.B) {
		for b.Loop() {
			if _, err := store.StatusEventID(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("event", func(b *testing.B) {
		for b.Loop() {
			if _, err := store.ParseStatusEvent(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// hostileStrings are pieces of strings that JSON escapes or that encoders
// treat apart.
var hostileStrings = []string{"a", "Z", " ", `"`, `\`, "/", "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f",
	"é", "日本", "\u2028", "\u2029", "\xff", "\xc3", "💥", "\ufffd"}

func randomString(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(8) {
		b.WriteString(hostileStrings[rng.IntN(len(hostileStrings))])
	}
	return b.String()
}

func randomEvent(rng *rand.Rand) store.StatusEvent {
	return store.StatusEvent{ID: rng.Int64N(1 << 40), Kind: randomString(rng), Namespace: randomString(rng),
		Name: randomString(rng), Source: randomString(rng), Phase: manifest.Phase(randomString(rng)),
		Message: randomString(rng), Generation: rng.Int64() - rng.Int64(), ObservedGeneration: rng.Int64N(100),
		Deleted: rng.IntN(2) == 0, Suspended: rng.IntN(2) == 0}
}

// TestStatusEventEncodesAsEncodingJSON checks that AppendJSON writes the
// bytes json.Marshal writes, for events full of strings that need escapes.
func TestStatusEventEncodesAsEncodingJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		ev := randomEvent(rng)
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.AppendJSON([]byte("prefix")); string(got) != "prefix"+string(want) {
			t.Fatalf("AppendJSON(%#v) = %s, want %s", ev, got[len("prefix"):], want)
		}
	}
}

// TestStatusEventDecodesAsEncodingJSON checks that ParseStatusEvent reads
// what encoding/json reads: events as the stores write them (spaced as
// PostgreSQL writes them, or compact), and payloads cut, reordered, or
// with values of other types, which only encoding/json may accept.
func TestStatusEventDecodesAsEncodingJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	spaced := strings.NewReplacer(`":`, `" : `, `,"`, `, "`)
	mangle := []func(string) string{
		func(s string) string { return s },
		func(s string) string { return spaced.Replace(s) },
		func(s string) string { return s[:rng.IntN(len(s))] },
		func(s string) string { return strings.Replace(s, `"id":`, `"id":"`, 1) },
		func(s string) string { return strings.Replace(s, `"deleted":false`, `"deleted":null`, 1) },
		func(s string) string { return strings.Replace(s, `"generation":`, `"generation":0`, 1) },
		func(s string) string { return strings.Replace(s, `"generation":`, `"generation":1.5,"x":`, 1) },
		func(s string) string { return strings.Replace(s, `{`, `{"extra":[1,{"a":2}],`, 1) },
		func(s string) string { return strings.Replace(s, `"kind":`, `"kind":1,"kind":`, 1) },
		func(s string) string { return s + " x" },
		func(s string) string { return " \n" + s + "\t " },
	}
	for range 20000 {
		b, err := json.Marshal(randomEvent(rng))
		if err != nil {
			t.Fatal(err)
		}
		payload := mangle[rng.IntN(len(mangle))](string(b))
		var want store.StatusEvent
		wantErr := json.Unmarshal([]byte(payload), &want)
		got, err := store.ParseStatusEvent(payload)
		if (err != nil) != (wantErr != nil) || (err == nil && got != want) {
			t.Fatalf("ParseStatusEvent(%s) = %#v, %v; encoding/json reads %#v, %v", payload, got, err, want, wantErr)
		}
	}
}

func BenchmarkStatusEventRoundTrip(b *testing.B) {
	payload := `{"id" : 12345, "kind" : "Widget", "namespace" : "default", "name" : "widget-12345", "source" : "infra", ` +
		`"status" : "ready", "status_message" : "applied", "generation" : 1, "observed_generation" : 1, "deleted" : false, "suspended" : false}`
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		ev, err := store.ParseStatusEvent(payload)
		if err != nil {
			b.Fatal(err)
		}
		buf = ev.AppendJSON(buf[:0])
	}
}
