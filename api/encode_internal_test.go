package api

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// TestAppendResourceMatchesEncodingJSON holds the hand-written encoder to
// what json.Encoder makes of NewResource, byte for byte.
func TestAppendResourceMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 23, 18, 4, 5, 123456789, time.UTC)
	whole := at.Truncate(time.Second)
	later := at.Add(time.Hour).In(time.FixedZone("X", 3600))
	tests := []struct {
		name string
		r    store.Resource
	}{
		{"empty", store.Resource{}},
		{"minimal", store.Resource{ID: 1, Resource: manifest.Resource{Kind: "Kind0", Group: "bench.example.com", Version: "v1", Name: "res-1"},
			Phase: manifest.PhasePending, CreatedAt: whole, UpdatedAt: at}},
		{"full", store.Resource{
			ID: 1<<53 + 1, Resource: manifest.Resource{Kind: "DatabaseCluster", Group: "infra.example.com", Version: "v1beta1", Namespace: "team-a", Name: "production-pg",
				Labels:      map[string]string{"team": "db", "env": "prod", "a": ""},
				Annotations: map[string]string{"no8s.io/prune": "disabled", "note": "<b>&amp;</b>"},
				Spec:        json.RawMessage(`{"engine": "postgres", "storage_gb": 500, "tags": {"x": "<y>&z"}, "n": 18446744073709551616, "l": "\u2028"}`),
				SpecHash:    "sha256:abc", Action: "provision-db",
				DependsOn: []manifest.ObjectRef{{Kind: "Network", Namespace: "ops", Name: "vpc"}, {Kind: "Dns", Namespace: "team-<b>", Name: "a&b"}, {Kind: "Zone", Name: "z"}}},
			Source:     store.SourceRef{Name: "infra", Path: "db/pg.yaml", Revision: "main@sha1:0123"},
			Generation: 7, ObservedGeneration: 6, Phase: manifest.PhaseReady,
			StatusMessage: "line one\nline \"two\"\t\x01 <tag> é ✓ \u2029 \xff",
			Conditions: []manifest.Condition{
				{Type: "Ready", Status: "True", Reason: "Applied", Message: "done", LastTransitionTime: at, ObservedGeneration: 6},
				{Type: "Reconciling", Status: "False", LastTransitionTime: whole},
				{Type: "Stalled", Status: "Unknown", LastTransitionTime: later},
			},
			Outputs:    json.RawMessage("{\n  \"endpoint\": \"db:5432\",\n  \"list\": [1, 2.5, true, null]\n}"),
			RetryCount: 3, NextReconcileAt: &at, DeletionRequestedAt: &whole, LastReconcileTime: &later,
			CreatedAt: whole, UpdatedAt: later, LeaseOwner: "host-1-a\"b", LeaseExpiresAt: &later, LeasedAt: &whole,
		}},
		{"owner without expiry", store.Resource{ID: 4, LeaseOwner: "gone"}},
		{"suspended through the API", store.Resource{ID: 6, SuspendedAt: &later}},
		{"suspended by its annotation", store.Resource{ID: 7, Resource: manifest.Resource{
			Annotations: map[string]string{manifest.AnnotationSuspend: "true"}}, SuspendedAt: &at}},
		{"lease without its start", store.Resource{ID: 5, LeaseOwner: "old", LeaseExpiresAt: &at}},
		{"empty collections", store.Resource{ID: 2, Resource: manifest.Resource{Labels: map[string]string{}, Annotations: map[string]string{},
			DependsOn: []manifest.ObjectRef{}, Spec: json.RawMessage(`{}`)}, Conditions: []manifest.Condition{}, Outputs: json.RawMessage(`null`)}},
		{"scalar outputs", store.Resource{ID: 3, Resource: manifest.Resource{Spec: json.RawMessage(` [ ] `)}, Outputs: json.RawMessage(`"x<y\u2028"`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(NewResource(&tt.r)); err != nil {
				t.Fatal(err)
			}
			if got := string(appendResource(nil, &tt.r)) + "\n"; got != want.String() {
				t.Errorf("appendResource:\n got %s\nwant %s", got, want.String())
			}
			rec := httptest.NewRecorder()
			writeResources(rec, 200, []*store.Resource{&tt.r, &tt.r})
			var list bytes.Buffer
			if err := json.NewEncoder(&list).Encode([]Resource{NewResource(&tt.r), NewResource(&tt.r)}); err != nil {
				t.Fatal(err)
			}
			if rec.Body.String() != list.String() || rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("writeResources:\n got %s\nwant %s", rec.Body, list.String())
			}
		})
	}
	rec := httptest.NewRecorder()
	writeResources(rec, 200, nil)
	if rec.Body.String() != "[]\n" {
		t.Errorf("an empty list = %q, want []", rec.Body)
	}
}

// TestEncodedShapes fails when a type the encoder writes by hand gains or
// loses a field, which the encoder must then follow. Resource's why is the
// exception: NewResource leaves it empty, and reads of one resource add it
// (writeResourceWhy).
func TestEncodedShapes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		v    any
		want string
	}{
		{Resource{}, "id name namespace kind resource_type_name resource_type_version api_version action_plugin spec spec_hash status status_message generation observed_generation conditions outputs source labels annotations depends_on retry_count next_reconcile_time deletion_requested_at created_at updated_at last_reconcile_time lease suspended suspended_by suspended_at orphaned finalizers plugin_config metadata why,omitempty"},
		{Lease{}, "holder since expires_at"},
		{manifest.Condition{}, "type status reason,omitempty message,omitempty lastTransitionTime observedGeneration,omitempty"},
		{manifest.ObjectRef{}, "kind namespace,omitempty name"},
		{SourceRef{}, "name path,omitempty revision,omitempty"},
	} {
		rt := reflect.TypeOf(tt.v)
		var tags []string
		for i := range rt.NumField() {
			tags = append(tags, rt.Field(i).Tag.Get("json"))
		}
		if got := strings.Join(tags, " "); got != tt.want {
			t.Errorf("%s has fields %q; the hand-written encoder writes %q: update appendResource", rt, got, tt.want)
		}
	}
}
