package sync_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/sync"
)

// TestTransitionRules: a CRD's transition rule (Gateway API's GatewayClass:
// spec.controllerName is immutable) refuses a commit that changes the field,
// in a sync and in a preview, comparing with the spec last accepted, at the
// field's line; other changes go through.
func TestTransitionRules(t *testing.T) {
	t.Parallel()
	crd, err := os.ReadFile("../manifest/testdata/crds/gateway-api-gatewayclasses.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := target("infra")
	class := func(spec string) string {
		// A comment and a document separator first, so that the field's
		// line is far from the file's and the document's.
		return "# the way in\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: internet}\nspec:\n  " +
			strings.ReplaceAll(strings.Trim(spec, "{}"), ", ", "\n  ") + "\n"
	}
	mustSync(t, s, tg, snapshot(map[string]string{"crd.yaml": string(crd), "gc.yaml": class("{controllerName: example.net/gateway-controller}")}))

	changed := snapshot(map[string]string{"crd.yaml": string(crd), "gc.yaml": class("{controllerName: example.net/other-controller}")})
	if _, err := s.Plan(t.Context(), tg, changed); err == nil || !strings.Contains(err.Error(), "gc.yaml:7: spec.controllerName: Value is immutable") {
		t.Errorf("the preview of the change: %v", err)
	}
	_, err = s.Sync(t.Context(), tg, changed, false)
	var serr *sync.Error
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonValidationFailed || len(serr.Problems) != 1 {
		t.Fatalf("changing an immutable field: %v", err)
	}
	if p := serr.Problems[0]; p.File != "gc.yaml" || p.Line != 7 || p.Pointer != "/spec/controllerName" || !strings.Contains(p.Message, "Value is immutable") {
		t.Errorf("problem %+v", p)
	}
	gc := get(t, st, "GatewayClass", "internet")
	if gc.Generation != 1 || !strings.Contains(string(gc.Spec), "gateway-controller") {
		t.Errorf("the refused change was applied: generation %d %s", gc.Generation, gc.Spec)
	}

	mustSync(t, s, tg, snapshot(map[string]string{"crd.yaml": string(crd),
		"gc.yaml": class("{controllerName: example.net/gateway-controller, description: the way in}")}))
	if gc := get(t, st, "GatewayClass", "internet"); gc.Generation != 2 {
		t.Errorf("a change the rules allow: generation %d", gc.Generation)
	}
}
