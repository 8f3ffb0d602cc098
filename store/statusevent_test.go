package store_test

import (
	"testing"

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
