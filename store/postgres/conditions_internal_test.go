package postgres

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
)

// TestDecodeConditions holds the direct parse of the conditions column to
// what encoding/json decodes, and checks that what it does not know is
// left to encoding/json.
func TestDecodeConditions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		in     string
		direct bool // the direct parse takes it
	}{
		{"empty", `[]`, true},
		{"jsonb's layout", `[{"type": "Ready", "reason": "Applied", "status": "True", "message": "applied generation 3", "observedGeneration": 3, "lastTransitionTime": "2026-11-23T18:04:05.123456Z"}, {"type": "Reconciling", "status": "False", "lastTransitionTime": "2026-11-23T18:04:05Z"}]`, true},
		{"compact", `[{"type":"Stalled","status":"Unknown","lastTransitionTime":"2026-11-23T19:04:05+01:00","observedGeneration":-2}]`, true},
		{"white space", " [ { \"type\" : \"A\" ,\n\t\"status\":\"True\", \"lastTransitionTime\": \"2026-01-02T03:04:05.5Z\" } ] ", true},
		{"unicode", `[{"type": "Ready", "status": "True", "message": "é ✓ <b>", "lastTransitionTime": "2026-11-23T18:04:05Z"}]`, true},
		{"an escape", `[{"type": "Ready", "status": "True", "message": "a \"quoted\" word\n", "lastTransitionTime": "2026-11-23T18:04:05Z"}]`, false},
		{"null", `[{"type": "Ready", "status": null, "lastTransitionTime": "2026-11-23T18:04:05Z"}]`, false},
		{"another field", `[{"type": "Ready", "status": "True", "severity": "Info", "lastTransitionTime": "2026-11-23T18:04:05Z"}]`, false},
		{"no time", `[{"type": "Ready", "status": "True"}]`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var want []manifest.Condition
			if err := json.Unmarshal([]byte(tt.in), &want); err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				want = nil
			}
			direct, ok := parseConditions([]byte(tt.in))
			if ok != tt.direct {
				t.Errorf("direct parse took it: %v, want %v", ok, tt.direct)
			}
			if ok && !reflect.DeepEqual(direct, want) {
				t.Errorf("direct parse = %+v, want %+v", direct, want)
			}
			got, err := decodeConditions([]byte(tt.in))
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("decodeConditions = %+v, %v; want %+v", got, err, want)
			}
		})
	}
	if _, err := decodeConditions([]byte(`[{"type": `)); err == nil {
		t.Error("a cut column decoded without error")
	}
}
