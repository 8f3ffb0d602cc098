package client_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/client"
)

// The lease is read whichever way the agent writes it, and absent when the
// agent reports none.
func TestResourceLease(t *testing.T) {
	t.Parallel()
	const base = `"id": 7, "name": "pg", "kind": "Database", "status": "reconciling"`
	expires := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		json    string
		holder  string
		expires *time.Time
		alive   *bool
	}{
		{"none", `{` + base + `}`, "", nil, nil},
		{"object", `{` + base + `, "lease": {"holder": "agent-a", "since": "2026-11-24T11:59:00Z", "expires": "2026-11-24T12:00:00Z", "holderAlive": false}}`,
			"agent-a", &expires, new(false)},
		{"object alive", `{` + base + `, "lease": {"holder": "agent-c", "expires": "2026-11-24T12:00:00Z", "alive": true}}`,
			"agent-c", &expires, new(true)},
		{"flat", `{` + base + `, "lease_holder": "agent-b", "lease_expires_at": "2026-11-24T12:00:00Z", "lease_holder_alive": true}`,
			"agent-b", &expires, new(true)},
		{"empty holder", `{` + base + `, "lease": {"holder": ""}}`, "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var r client.Resource
			if err := json.Unmarshal([]byte(tt.json), &r); err != nil {
				t.Fatal(err)
			}
			if r.ID != 7 || r.Name != "pg" || r.Kind != "Database" {
				t.Errorf("resource fields: %+v", r.Resource)
			}
			if tt.holder == "" {
				if r.Lease != nil {
					t.Errorf("lease %+v, want none", r.Lease)
				}
				return
			}
			l := r.Lease
			if l == nil || l.Holder != tt.holder || l.Expires == nil || !l.Expires.Equal(*tt.expires) ||
				l.Alive == nil || *l.Alive != *tt.alive {
				t.Fatalf("lease %+v", l)
			}
			// Written back, the lease is one object beside the API's fields.
			out, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), `"lease":{"holder":"`+tt.holder+`"`) || !strings.Contains(string(out), `"kind":"Database"`) {
				t.Errorf("marshalled: %s", out)
			}
		})
	}
}

func TestNewRefusesOtherSchemes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		server string
		ok     bool
	}{{"127.0.0.1:8080", true}, {"http://h:1/", true}, {"https://h", true}, {"ftp://h", false}, {"http://[::1", false}} {
		_, err := client.New(tt.server, "")
		if (err == nil) != tt.ok {
			t.Errorf("New(%q): %v", tt.server, err)
		}
	}
}
