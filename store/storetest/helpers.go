package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// gitSource is a source reference as a Git source writes it.
func gitSource(name, path string) store.SourceRef {
	return store.SourceRef{Name: name, Path: path, Revision: manifest.Revision("main@sha1:" + hashOf(name + path)[:40])}
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// resource returns a declared resource of kind Widget whose spec is spec.
func resource(name, spec string) *manifest.Resource {
	return &manifest.Resource{
		Kind:     "Widget",
		Group:    "example.com",
		Version:  "v1",
		Name:     name,
		Spec:     json.RawMessage(spec),
		SpecHash: "sha256:" + hashOf(spec),
		Origin:   manifest.Origin{File: "widgets/" + name + ".yaml", Document: 0, Line: 1},
	}
}

// withSpec returns a copy of r with another spec and its hash.
func withSpec(r *manifest.Resource, spec string) *manifest.Resource {
	c := *r
	c.Spec = json.RawMessage(spec)
	c.SpecHash = "sha256:" + hashOf(spec)
	return &c
}

// now returns the current time at the precision every backend keeps.
func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

func ptr[T any](v T) *T { return &v }

// wantErr fails unless errors.Is(err, target).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

// sameMap compares maps, an empty map being equal to nil.
func sameMap(a, b map[string]string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// sameTime compares optional times by instant.
func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// checkUTC fails unless t is in UTC.
func checkUTC(t *testing.T, what string, tm time.Time) {
	t.Helper()
	if tm.IsZero() {
		t.Errorf("%s is zero", what)
		return
	}
	if tm.Location() != time.UTC {
		t.Errorf("%s = %v, want it in UTC", what, tm)
	}
}

// checkDesired compares the desired state of a stored resource with what was
// declared.
func checkDesired(t *testing.T, got *store.Resource, want *manifest.Resource, src store.SourceRef) {
	t.Helper()
	if got.Kind != want.Kind || got.Group != want.Group || got.Version != want.Version || got.Namespace != want.Namespace || got.Name != want.Name {
		t.Errorf("identity = %s %s/%s %s/%s, want %s %s/%s %s/%s",
			got.Kind, got.Group, got.Version, got.Namespace, got.Name, want.Kind, want.Group, want.Version, want.Namespace, want.Name)
	}
	if !sameMap(got.Labels, want.Labels) {
		t.Errorf("Labels = %v, want %v", got.Labels, want.Labels)
	}
	if !sameMap(got.Annotations, want.Annotations) {
		t.Errorf("Annotations = %v, want %v", got.Annotations, want.Annotations)
	}
	if !bytes.Equal(got.Spec, want.Spec) {
		t.Errorf("Spec = %s, want %s", got.Spec, want.Spec)
	}
	if got.SpecHash != want.SpecHash {
		t.Errorf("SpecHash = %s, want %s", got.SpecHash, want.SpecHash)
	}
	if got.Action != want.Action {
		t.Errorf("Action = %q, want %q", got.Action, want.Action)
	}
	if len(got.DependsOn) != len(want.DependsOn) || (len(want.DependsOn) > 0 && !reflect.DeepEqual(got.DependsOn, want.DependsOn)) {
		t.Errorf("DependsOn = %v, want %v", got.DependsOn, want.DependsOn)
	}
	if got.Source != src {
		t.Errorf("Source = %+v, want %+v", got.Source, src)
	}
	if got.Origin.File != src.Path || got.Origin.Document != want.Origin.Document || got.Origin.Line != want.Origin.Line {
		t.Errorf("Origin = %+v, want file %s, document %d, line %d", got.Origin, src.Path, want.Origin.Document, want.Origin.Line)
	}
}
