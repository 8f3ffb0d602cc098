package sync_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// TestSyncNameFormats: dotted names sync as DNS subdomains; a type that
// asks for label names keeps asking once stored, so that another source's
// resources of it are held to labels too, and through the API.
func TestSyncNameFormats(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	labelType := strings.Replace(strings.Replace(widgetType, "Widget", "Host", 1), "  action: make-widget\n", "  action: make-widget\n  nameFormat: label\n", 1)
	mustSync(t, s, target("types"), snapshot(map[string]string{"types.yaml": widgetType, "hosts.yaml": labelType}))
	stored, err := st.GetResourceTypeByName(t.Context(), "Host", "v1")
	if err != nil || stored.Annotations["no8s.io/name-format"] != "label" {
		t.Fatalf("stored type: %+v %v", stored, err)
	}
	host := func(name string) string {
		return "apiVersion: example.com/v1\nkind: Host\nmetadata:\n  name: " + name + "\nspec: {size: 1}\n"
	}
	tests := []struct {
		name, file, want string
	}{
		{"a dotted name", widget("xnopresources.nop.example.org", "{size: 1}"), ""},
		{"a long dotted name", widget(strings.Repeat("a", 62)+"."+strings.Repeat("b", 62)+".example.org", "{size: 1}"), ""},
		{"a label", host("web-1"), ""},
		{"a dotted name of a label type", host("web.example.org"), `w.yaml:4: metadata.name: Invalid value: "web.example.org": a lowercase RFC 1123 label must consist of`},
		{"a name with an empty label", widget("a..b", "{size: 1}"), `w.yaml:5: metadata.name: Invalid value: "a..b": a lowercase RFC 1123 subdomain must consist of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := "src-" + strings.ReplaceAll(tt.name, " ", "-")
			res, err := s.Sync(t.Context(), target(name), snapshot(map[string]string{"w.yaml": tt.file}), false)
			if tt.want == "" {
				if err != nil || len(res.Plan.Creates) != 1 {
					t.Fatalf("sync: %v", err)
				}
				c := res.Plan.Creates[0]
				if got := get(t, st, c.Kind, c.Name); got.Source.Name != name {
					t.Errorf("stored %+v", got)
				}
				return
			}
			var serr *sync.Error
			if !errors.As(err, &serr) || len(serr.Problems) != 1 || !strings.HasPrefix(serr.Problems[0].String(), tt.want) {
				t.Fatalf("sync: %v, want %q", err, tt.want)
			}
		})
	}
	// The API's writes validate against the stored type, format included.
	_, err = s.ApplyDocument(t.Context(), func(context.Context, store.Store) ([]byte, error) { return []byte(host("api.example.org")), nil })
	var serr *sync.Error
	if !errors.As(err, &serr) || !strings.Contains(err.Error(), `Invalid value: "api.example.org": a lowercase RFC 1123 label`) {
		t.Errorf("an API write of a dotted name of a label type: %v", err)
	}
}

// TestSyncWarnsOfGeneratorMetadata: the metadata a server sets, left in a
// manifest by a generator, is ignored with one warning per file, which the
// plan, its summary and the source's history carry, sync after sync.
func TestSyncWarnsOfGeneratorMetadata(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	generated := strings.Replace(widget("a", "{size: 1}"), "  name: a\n",
		"  name: a\n  creationTimestamp: \"2025-03-01T10:00:00Z\"\n  uid: 7c0b7e0e-6a3b-4a8f-9d5e-0c1f2a3b4c5d\n  resourceVersion: \"4711\"\n", 1)
	files := map[string]string{"types.yaml": widgetType, "w.yaml": generated + widget("b", "{size: 2}"), "plain.yaml": widget("c", "{size: 3}")}
	want := "w.yaml:6: metadata.creationTimestamp, metadata.uid, metadata.resourceVersion ignored: a server sets them, and a manifest need not carry them"
	res := mustSync(t, s, target("infra"), snapshot(files))
	if len(res.Plan.Warnings) != 1 || res.Plan.Warnings[0] != want || !strings.Contains(res.Plan.Summary(), "warning: "+want) {
		t.Fatalf("warnings %q, summary %s", res.Plan.Warnings, res.Plan.Summary())
	}
	recs, err := st.ListSyncRecords(t.Context(), "infra", 1)
	if err != nil || len(recs) != 1 || !strings.Contains(recs[0].Message, want) {
		t.Errorf("sync record: %+v %v", recs, err)
	}
	// Ignored: the resource is as it would be without them.
	if a := get(t, st, "Widget", "a"); string(a.Spec) != `{"color":"grey","size":1}` || a.Generation != 1 || len(a.Annotations)+len(a.Labels) != 0 {
		t.Errorf("stored: %+v", a)
	}
	// Another revision, the file unchanged (its work cached): warned again;
	// the fields gone: no warning, and nothing to update.
	files["plain.yaml"] = widget("c", "{size: 4}")
	res = mustSync(t, s, target("infra"), snapshot(files))
	if len(res.Plan.Warnings) != 1 || res.Plan.Warnings[0] != want {
		t.Errorf("a later revision's warnings %q", res.Plan.Warnings)
	}
	files["w.yaml"] = widget("a", "{size: 1}") + widget("b", "{size: 2}")
	res = mustSync(t, s, target("infra"), snapshot(files))
	if len(res.Plan.Warnings) != 0 || len(res.Plan.Updates) != 0 {
		t.Errorf("without the fields: warnings %q, updates %v", res.Plan.Warnings, res.Plan.Updates)
	}
}

// TestSyncExpansionFollowsMaxFileSize: a document of a source may expand
// through YAML aliases to what the source's files may hold, not more.
func TestSyncExpansionFollowsMaxFileSize(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	// 3 KiB written once, 4 times over through aliases: 12 KiB expanded.
	big := strings.Repeat("z", 3<<10)
	doc := "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: big}\nspec:\n  size: 1\n  color: &c " + big + "\n" +
		"pluginConfig: {a: *c, b: *c, c: *c}\n"
	tests := []struct {
		name, kind string
		limit      int64
		want       string
	}{
		{"default", "Default", 0, ""},
		{"a larger limit", "Larger", 64 << 10, ""},
		{"a smaller limit", "Smaller", 8 << 10, "w.yaml:1: document expands to more than 8192 bytes through YAML aliases"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tg := target("src-" + strings.ReplaceAll(tt.name, " ", "-"))
			tg.MaxFileSize = tt.limit
			_, err := s.Sync(t.Context(), tg, snapshot(map[string]string{"types.yaml": strings.ReplaceAll(widgetType, "Widget", tt.kind),
				"w.yaml": strings.Replace(doc, "Widget", tt.kind, 1)}), false)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("sync: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("sync: %v, want %q", err, tt.want)
			}
		})
	}
}
