package postgres_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// BenchmarkListResourceDigests reads the digests of a source's 10,000
// resources, one file each, as every sync of that source does before it
// plans.
func BenchmarkListResourceDigests(b *testing.B) {
	const n = 10_000
	s, err := postgres.Open(b.Context(), pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	rs := make([]*manifest.Resource, n)
	for i := range rs {
		spec := fmt.Sprintf(`{"size":%d}`, i)
		sum := sha256.Sum256([]byte(spec))
		rs[i] = &manifest.Resource{Kind: fmt.Sprintf("Kind%d", i%10), Group: "example.com", Version: "v1",
			Name: fmt.Sprintf("res-%05d", i), Labels: map[string]string{"team": "a"}, Spec: json.RawMessage(spec),
			SpecHash: "sha256:" + hex.EncodeToString(sum[:]), Origin: manifest.Origin{File: fmt.Sprintf("resources/r%05d.yaml", i), Line: 1}}
	}
	src := store.SourceRef{Name: "infra", Revision: manifest.Revision("main@sha1:" + fmt.Sprintf("%040d", 1))}
	if _, err := s.ApplyResources(b.Context(), rs, src); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		ds, err := s.ListResourceDigests(b.Context(), "infra")
		if err != nil || len(ds) != n {
			b.Fatalf("%d digests, %v", len(ds), err)
		}
	}
}
