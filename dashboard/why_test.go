package dashboard

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/why"
)

// TestWhyShown: db-production waits on production-pg, which waits on
// prod-vpc, which failed: its page shows the chain and the root cause's
// message; a suspension's reason is shown as text, never markup; a stalled
// source says what to approve; a ready resource shows no Why.
func TestWhyShown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	h := newHandler(f.st, Options{})
	if _, body, _ := get(t, h, fmt.Sprintf("/resources/%d", f.ids["db-production"])); strings.Contains(body, `id="why-h"`) {
		t.Fatalf("a ready resource shows a Why:\n%s", text(body))
	}
	next := time.Now().Add(time.Hour)
	set := func(name string, u store.StatusUpdate) {
		t.Helper()
		if _, err := f.st.SetResourceStatus(ctx, f.ids[name], u); err != nil {
			t.Fatal(err)
		}
	}
	set("prod-vpc", store.StatusUpdate{Phase: manifest.PhaseFailed, Message: "quota exceeded", RetryCount: 2, NextReconcileAt: &next})
	set("production-pg", store.StatusUpdate{Phase: manifest.PhasePending, Message: "waiting"})
	set("db-production", store.StatusUpdate{Phase: manifest.PhasePending, Message: "waiting"})

	status, body, _ := get(t, h, fmt.Sprintf("/resources/%d", f.ids["db-production"]))
	page := text(body)
	if status != http.StatusOK || !strings.Contains(page, "Why") ||
		!strings.Contains(body, fmt.Sprintf(`<a href="/resources/%d">DatabaseCluster/production-pg</a>`, f.ids["production-pg"])) ||
		!strings.Contains(body, fmt.Sprintf(`<a href="/resources/%d">Network/prod-vpc</a>`, f.ids["prod-vpc"])) ||
		!strings.Contains(page, "DependencyNotReady") || !strings.Contains(page, "quota exceeded") || !strings.Contains(page, "attempt 2") {
		t.Fatalf("page of a resource blocked three levels deep (%d):\n%s", status, page)
	}

	const reason = `<script>alert("x")</script> & maintenance`
	if _, err := f.st.SuspendResource(ctx, f.ids["prod-vpc"], true, store.Suspension{Reason: reason, Identity: "ops"}); err != nil {
		t.Fatal(err)
	}
	_, body, _ = get(t, h, fmt.Sprintf("/resources/%d", f.ids["prod-vpc"]))
	if strings.Contains(body, "<script>") || !strings.Contains(text(body), "(ops): "+reason) {
		t.Fatalf("suspended page:\n%s", body)
	}

	src, err := f.st.GetSource(ctx, sourceName)
	if err != nil {
		t.Fatal(err)
	}
	rev := "sha256:" + strings.Repeat("ab", 32)
	src.Phase, src.LastAttemptedRevision = store.SourceStalled, manifest.Revision(rev)
	src.Message = "PruneLimitExceeded: revision " + rev + " would delete 4 of 5 resources, over 25%"
	if _, err := f.st.PutSource(ctx, src); err != nil {
		t.Fatal(err)
	}
	_, body, _ = get(t, h, "/sources/"+sourceName)
	if page := text(body); !strings.Contains(page, "PruneLimitExceeded") ||
		!strings.Contains(page, "no8s-agent approve source "+sourceName+" --revision "+rev) {
		t.Fatalf("stalled source page:\n%s", page)
	}

	// Given the API's explanation, the page shows that one.
	asked := false
	h = newHandler(f.st, Options{Why: func(r *http.Request, id int64) (*why.Why, error) {
		asked = true
		return &why.Why{Reason: "FromTheModel", Message: "as the read model says"}, nil
	}})
	_, body, _ = get(t, h, fmt.Sprintf("/resources/%d", f.ids["db-production"]))
	if !asked || !strings.Contains(text(body), "FromTheModel: as the read model says") {
		t.Fatalf("page with Options.Why:\n%s", text(body))
	}
}
