package sync_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/admission"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// hookServer is an admission hook written for a test: it checks the
// signature and answers what decide says.
type hookServer struct {
	t      *testing.T
	secret string
	mu     gosync.Mutex
	seen   []hookRequest
	decide func(r hookRequest) map[string]any
	*httptest.Server
}

type hookRequest struct {
	UID       string          `json:"uid"`
	Kind      string          `json:"kind"`
	Name      string          `json:"name"`
	Operation string          `json:"operation"`
	Object    json.RawMessage `json:"object"`
	OldObject json.RawMessage `json:"oldObject"`
	DryRun    bool            `json:"dryRun"`
}

func newHook(t *testing.T, secret string, decide func(hookRequest) map[string]any) *hookServer {
	h := &hookServer{t: t, secret: secret, decide: decide}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mac := hmac.New(sha256.New, []byte(h.secret))
		mac.Write(body)
		if got := r.Header.Get(admission.HeaderSignature); got != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var review struct {
			Request hookRequest `json:"request"`
		}
		if err := json.Unmarshal(body, &review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.seen = append(h.seen, review.Request)
		h.mu.Unlock()
		resp := h.decide(review.Request)
		if resp == nil { // hang until the caller gives up
			<-r.Context().Done()
			return
		}
		resp["uid"] = review.Request.UID
		json.NewEncoder(w).Encode(map[string]any{"response": resp})
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.seen...)
}

// chain builds the admission hooks of hs, with the log they write to.
func chain(t *testing.T, hooks ...admission.Hook) (*admission.Chain, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	for i := range hooks {
		hooks[i].SecretEnv = "HOOK_SECRET"
	}
	c, err := admission.New(hooks, func(string) (string, bool) { return "hook-secret-1", true },
		slog.New(slog.NewTextHandler(&lockedWriter{w: &logs}, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, &logs
}

type lockedWriter struct {
	mu gosync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestAdmissionHooks: a denying hook refuses the whole revision and nothing
// changes; a mutating hook's patch is validated and stored; a hook that
// hangs refuses under Fail and lets through under Ignore; previews tell
// hooks they are dry runs.
func TestAdmissionHooks(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	ctx := t.Context()

	// Denies widgets larger than 5, and every deletion of "keep".
	validating := newHook(t, "hook-secret-1", func(r hookRequest) map[string]any {
		var obj struct {
			Spec struct{ Size int } `json:"spec"`
		}
		json.Unmarshal(r.Object, &obj)
		switch {
		case strings.Contains(string(r.Object), `"tier":"forbidden"`):
			return map[string]any{"allowed": false, "status": map[string]any{"message": "tier forbidden is not allowed"}}
		case r.Operation == "delete" && r.Name == "keep":
			return map[string]any{"allowed": false, "status": map[string]any{"message": "keep is protected"}}
		case obj.Spec.Size > 5:
			return map[string]any{"allowed": false, "status": map[string]any{"message": "widgets larger than 5 need approval"}}
		}
		return map[string]any{"allowed": true}
	})
	// Labels every widget with its team, and sets color when it is "paint".
	mutating := newHook(t, "hook-secret-1", func(r hookRequest) map[string]any {
		if r.Operation == "delete" {
			return map[string]any{"allowed": true}
		}
		patch := `[{"op": "add", "path": "/metadata/labels", "value": {"team": "platform"}}]`
		if strings.Contains(string(r.Object), `"color":"paint"`) {
			patch = `[{"op": "replace", "path": "/spec/color", "value": "red"}, {"op": "add", "path": "/metadata/labels", "value": {"team": "platform"}}]`
		}
		if strings.Contains(string(r.Object), `"color":"invalid"`) {
			patch = `[{"op": "replace", "path": "/spec/size", "value": 0}]`
		}
		return map[string]any{"allowed": true, "patchType": "JSONPatch", "patch": json.RawMessage(patch)}
	})
	c, logs := chain(t,
		admission.Hook{Name: "labels", URL: mutating.URL, Type: admission.Mutating, Kinds: []string{"Widget"}},
		admission.Hook{Name: "policy", URL: validating.URL, Type: admission.Validating})
	s := sync.New(st, nil)
	s.UseAdmission(c)
	tg := target("infra")

	first := snapshot(map[string]string{"types.yaml": widgetType,
		"w.yaml": widget("a", "{size: 2, color: paint}") + widget("keep", "{size: 1}")})
	mustSync(t, s, tg, first)
	a := get(t, st, "Widget", "a")
	if string(a.Spec) != `{"color":"red","size":2}` || a.Labels["team"] != "platform" {
		t.Errorf("the mutating hook's patch was not stored: spec %s labels %v", a.Spec, a.Labels)
	}
	if rs := validating.requests(); len(rs) != 2 || !strings.Contains(string(rs[0].Object), `"team":"platform"`) {
		t.Errorf("the validating hook did not see the patched objects: %+v", rs)
	}

	// A revision with one refused change applies nothing at all.
	before := get(t, st, "Widget", "keep")
	refused := snapshot(map[string]string{"types.yaml": widgetType,
		"w.yaml": widget("a", "{size: 9}") + widget("keep", "{size: 3}") + widget("b", "{size: 1}")})
	_, err := s.Sync(ctx, tg, refused, false)
	var serr *sync.Error
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonAdmissionDenied ||
		!strings.Contains(serr.Error(), "widgets larger than 5 need approval") || !strings.Contains(serr.Error(), "policy") {
		t.Fatalf("a denied change: %v", err)
	}
	if p := serr.Problems[0]; p.File != "w.yaml" || p.Line == 0 {
		t.Errorf("the denial is not placed at its resource: %+v", p)
	}
	if got := get(t, st, "Widget", "keep"); got.Generation != before.Generation || string(got.Spec) != string(before.Spec) {
		t.Errorf("a refused revision changed keep: %s", got.Spec)
	}
	if _, err := st.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: "b"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused revision created b: %v", err)
	}
	src, _ := st.GetSource(ctx, "infra")
	if src.Phase != store.SourceFailed || !strings.Contains(src.Message, "need approval") {
		t.Errorf("source after the denial: %s %s", src.Phase, src.Message)
	}
	if !strings.Contains(logs.String(), "policy") || !strings.Contains(logs.String(), "Widget") {
		t.Errorf("the hook calls are not logged:\n%s", logs)
	}

	// A deletion the hook refuses; the refusal is judged again each time,
	// since a hook may change its mind.
	gone := snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 2, color: paint}")})
	for range 2 {
		if _, err := s.Sync(ctx, tg, gone, false); !errors.As(err, &serr) || !strings.Contains(err.Error(), "keep is protected") {
			t.Fatalf("deleting keep: %v", err)
		}
	}
	if rs := validating.requests(); rs[len(rs)-1].Operation != "delete" || string(rs[len(rs)-1].Object) != "null" ||
		!strings.Contains(string(rs[len(rs)-1].OldObject), `"name":"keep"`) {
		t.Errorf("the delete review: %+v", rs[len(rs)-1])
	}

	// A patch that makes the object invalid refuses the revision too.
	invalid := snapshot(map[string]string{"types.yaml": widgetType,
		"w.yaml": widget("a", "{size: 2, color: invalid}") + widget("keep", "{size: 1}")})
	if _, err := s.Sync(ctx, tg, invalid, false); !errors.As(err, &serr) || serr.Reason != sync.ReasonAdmissionDenied ||
		!strings.Contains(err.Error(), "as admission hooks patched it") || !strings.Contains(err.Error(), "size") {
		t.Fatalf("an invalid patch: %v", err)
	}

	// A change of annotations alone is put to the hooks too.
	labelled := snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 2, color: paint}") +
		strings.Replace(widget("keep", "{size: 1}"), "name: keep", "name: keep\n  annotations: {tier: forbidden}", 1)})
	if _, err := s.Sync(ctx, tg, labelled, false); !errors.As(err, &serr) || !strings.Contains(err.Error(), "tier forbidden is not allowed") {
		t.Fatalf("an annotation-only change: %v", err)
	}

	// Previews are dry runs.
	n := len(validating.requests())
	if _, err := s.Plan(ctx, tg, snapshot(map[string]string{"types.yaml": widgetType,
		"w.yaml": widget("a", "{size: 3}") + widget("keep", "{size: 1}")})); err != nil {
		t.Fatal(err)
	}
	rs := validating.requests()[n:]
	if len(rs) == 0 || rs[0].Name != "a" {
		t.Errorf("the preview put no change to the hooks: %+v", rs)
	}
	for _, r := range rs {
		if !r.DryRun {
			t.Errorf("a preview's review is not a dry run: %+v", r)
		}
	}
}

// TestAdmissionHookTimeout: a hook that does not answer within its timeout
// refuses the change under failurePolicy Fail, and lets it through with a
// warning under Ignore.
func TestAdmissionHookTimeout(t *testing.T) {
	t.Parallel()
	hang := newHook(t, "hook-secret-1", func(hookRequest) map[string]any { return nil })
	for _, tt := range []struct {
		policy admission.FailurePolicy
		want   string
	}{{admission.Fail, sync.ReasonAdmissionFailed}, {admission.Ignore, ""}} {
		t.Run(string(tt.policy), func(t *testing.T) {
			t.Parallel()
			st, _ := newStore(t)
			c, _ := chain(t, admission.Hook{Name: "slow", URL: hang.URL, Type: admission.Validating,
				FailurePolicy: tt.policy, Timeout: admission.Duration{Duration: 300 * time.Millisecond}})
			s := sync.New(st, nil)
			s.UseAdmission(c)
			res, err := s.Sync(t.Context(), target("infra"), snapshot(map[string]string{"types.yaml": widgetType,
				"w.yaml": widget("a", "{size: 2}")}), false)
			var serr *sync.Error
			switch {
			case tt.want != "":
				if !errors.As(err, &serr) || serr.Reason != tt.want || !strings.Contains(err.Error(), "slow") {
					t.Fatalf("under Fail: %v", err)
				}
				if _, err := st.GetResourceByName(context.Background(), manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: "a"}); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("created despite the failed hook: %v", err)
				}
			case err != nil:
				t.Fatalf("under Ignore: %v", err)
			default:
				get(t, st, "Widget", "a")
				if w := strings.Join(res.Plan.Warnings, "\n"); !strings.Contains(w, "slow") {
					t.Errorf("no warning of the ignored hook: %q", w)
				}
			}
		})
	}
}
