package admission_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/admission"
)

// TestEveryCallLoggedAtInfo reviews a resource through hooks that patch,
// allow and deny, with the logger at its default level: every call is an
// INFO record naming the hook, the resource, the decision and the time it
// took, and none holds the object's spec or a hook's secret.
func TestEveryCallLoggedAtInfo(t *testing.T) {
	t.Parallel()
	const secret = "hook-signing-key-5e1f"
	hooks := []admission.Hook{mutating("label"), validating("check"), validating("veto")}
	responders := map[string]responder{
		"label": patchArray(`[{"op":"add","path":"/metadata/labels/team","value":"shop"}]`),
		"check": allow(),
		"veto":  deny("not on a friday", 403),
	}
	for i := range hooks {
		h := &hooks[i]
		checked := ""
		if h.Name == "check" {
			h.SecretEnv, checked = "CHECK_SECRET", secret
		}
		h.URL = newReceiver(t, checked, responders[h.Name]).srv.URL + "/review"
	}
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	getenv := func(name string) (string, bool) { return secret, name == "CHECK_SECRET" }
	c, err := admission.New(hooks, getenv, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := createReq
	req.Namespace = "shop"
	res, err := c.Review(context.Background(), req)
	if err != nil || res.Allowed || !res.Patched {
		t.Fatalf("Review = %+v, %v; want patched, then denied", res, err)
	}

	out := logs.String()
	for _, leak := range []string{secret, "large", `"size"`} {
		if strings.Contains(out, leak) {
			t.Errorf("the logs show %q:\n%s", leak, out)
		}
	}
	want := map[string]struct {
		outcome string
		allowed bool
	}{"label": {"patched", true}, "check": {"allowed", true}, "veto": {"denied", false}}
	seen := map[string]bool{}
	for line := range strings.Lines(out) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		hook, _ := rec["hook"].(string)
		w, ok := want[hook]
		if !ok || seen[hook] || rec["level"] != "INFO" || rec["msg"] != "admission hook called" || rec["outcome"] != w.outcome ||
			rec["allowed"] != w.allowed || rec["kind"] != "Database" || rec["namespace"] != "shop" || rec["name"] != "orders" ||
			rec["operation"] != "create" || rec["duration"] == nil {
			t.Errorf("log record %v", rec)
		}
		seen[hook] = true
	}
	if len(seen) != len(want) {
		t.Errorf("records of %v, want one of each of label, check and veto:\n%s", seen, out)
	}
}
