package client_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/client"
)

// A resource's lease is read as the API writes it, and absent when it has
// none.
func TestResourceLease(t *testing.T) {
	t.Parallel()
	const base = `"id": 7, "name": "pg", "kind": "Database", "status": "reconciling"`
	since := time.Date(2026, 11, 24, 11, 59, 0, 0, time.UTC)
	expires := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		json   string
		holder string
		since  *time.Time
	}{
		{"none", `{` + base + `}`, "", nil},
		{"null", `{` + base + `, "lease": null}`, "", nil},
		{"held", `{` + base + `, "lease": {"holder": "agent-a", "since": "2026-11-24T11:59:00Z", "expires_at": "2026-11-24T12:00:00Z"}}`, "agent-a", &since},
		{"held, since unknown", `{` + base + `, "lease": {"holder": "agent-b", "since": null, "expires_at": "2026-11-24T12:00:00Z"}}`, "agent-b", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var r client.Resource
			if err := json.Unmarshal([]byte(tc.json), &r); err != nil {
				t.Fatal(err)
			}
			if r.ID != 7 || r.Name != "pg" {
				t.Errorf("resource %+v", r)
			}
			if tc.holder == "" {
				if r.Lease != nil {
					t.Errorf("lease %+v, want none", r.Lease)
				}
				return
			}
			l := r.Lease
			if l == nil || l.Holder != tc.holder || !l.ExpiresAt.Equal(expires) ||
				(tc.since == nil) != (l.Since == nil) || (tc.since != nil && !l.Since.Equal(*tc.since)) {
				t.Errorf("lease %+v, want %s since %v until %v", l, tc.holder, tc.since, expires)
			}
		})
	}
}
