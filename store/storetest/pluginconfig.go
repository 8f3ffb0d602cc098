package storetest

import (
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// testPluginConfigAndTypeAnnotations: a resource's plugin configuration is
// kept byte for byte through every write path and cleared by a write
// without it; a type's annotations are kept and replaced.
func testPluginConfigAndTypeAnnotations(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "widgets/all.yaml")
	withConfig := func(name, cfg string) *store.Resource {
		t.Helper()
		r := resource(name, `{"size":1}`)
		r.PluginConfig = []byte(cfg)
		r.SpecHash = "sha256:" + hashOf(`{"size":1}`+cfg)
		got, _, err := s.ApplyResource(ctx, r, src)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	const cfg = `{"ref":"main","zones":[1,2]}`
	one := withConfig("one", cfg)
	if string(one.PluginConfig) != cfg {
		t.Errorf("ApplyResource kept plugin config %q, want %q", one.PluginConfig, cfg)
	}
	if got, err := s.GetResource(ctx, one.ID); err != nil || string(got.PluginConfig) != cfg {
		t.Errorf("GetResource: plugin config %q, %v", got.PluginConfig, err)
	}
	if two := withConfig("one", `{"ref":"release"}`); string(two.PluginConfig) != `{"ref":"release"}` || two.Generation != 2 {
		t.Errorf("changed plugin config: %q at generation %d, want generation 2", two.PluginConfig, two.Generation)
	}
	plain := resource("one", `{"size":1}`)
	cleared, _, err := s.ApplyResource(ctx, plain, src)
	if err != nil || cleared.PluginConfig != nil {
		t.Errorf("a write without plugin config left %q, %v", cleared.PluginConfig, err)
	}

	batch := resource("two", `{"size":2}`)
	batch.PluginConfig = []byte(cfg)
	if _, err := s.ApplyResources(ctx, []*manifest.Resource{batch}, src); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Name: "two"})
	if err != nil || string(got.PluginConfig) != cfg {
		t.Errorf("ApplyResources kept plugin config %q, %v", got.PluginConfig, err)
	}
	if _, err := s.ApplyResources(ctx, []*manifest.Resource{resource("two", `{"size":2}`)}, src); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Name: "two"}); err != nil || got.PluginConfig != nil {
		t.Errorf("ApplyResources without plugin config left %q, %v", got.PluginConfig, err)
	}

	typ := widgetType("v1", "example.com", gitSource("infra", "types/widget.yaml"))
	typ.Annotations = map[string]string{"owner": "platform", "docs": "https://example.com/widget"}
	put, err := s.PutResourceType(ctx, typ)
	if err != nil || !sameMap(put.Annotations, typ.Annotations) {
		t.Fatalf("PutResourceType annotations %v, %v", put.Annotations, err)
	}
	typ.Annotations = map[string]string{"owner": "dba"}
	if put, err = s.PutResourceType(ctx, typ); err != nil || !sameMap(put.Annotations, typ.Annotations) {
		t.Errorf("replaced annotations %v, %v", put.Annotations, err)
	}
	if read, err := s.GetResourceType(ctx, put.ID); err != nil || !sameMap(read.Annotations, typ.Annotations) {
		t.Errorf("GetResourceType annotations %v, %v", read.Annotations, err)
	}
}
