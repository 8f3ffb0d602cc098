package masked_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/masked"
	"github.com/no8s/no8s-agent/store/sqlite"
)

// TestMasksWhatIsWritten writes a secret through every store write that
// carries text, through the masking store and inside a transaction, and
// reads every row back: the text is masked, the desired state is kept as
// declared (and masked as the specs of past generations are read), and
// what the caller passed is left as it was.
func TestMasksWhatIsWritten(t *testing.T) {
	t.Parallel()
	const secret = "tok-5a1e9d03c7"
	ctx := t.Context()
	backend, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(backend.Close)
	if err := backend.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	st := masked.New(backend, redact.New(secret))
	src := store.SourceRef{Name: "infra", Path: "a.yaml"}
	if _, err := st.PutResourceType(ctx, &store.ResourceType{Name: "Widget", Version: "v1", Group: "example.com",
		Schema: json.RawMessage(`{"type":"object"}`), Source: src}); err != nil {
		t.Fatal(err)
	}
	spec := `{"token":"` + secret + `"}`
	r, err := st.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1", Name: "a",
		Spec: json.RawMessage(spec), SpecHash: "sha256:1", Origin: manifest.Origin{File: "a.yaml"}}, src)
	if err != nil {
		t.Fatal(err)
	}
	conds := []manifest.Condition{{Type: manifest.ConditionReady, Status: manifest.ConditionFalse, Reason: "Failed", Message: "as " + secret}}
	if _, err := st.SetResourceStatus(ctx, r.ID, store.StatusUpdate{Phase: manifest.PhaseFailed, Message: "login " + secret,
		Conditions: conds, Outputs: json.RawMessage(`{"` + secret + `": "` + secret + `"}`)}); err != nil {
		t.Fatal(err)
	}
	if conds[0].Message != "as "+secret {
		t.Error("the caller's conditions were changed")
	}
	var seen strings.Builder
	show := func(v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		seen.Write(data)
		seen.WriteString("\n")
	}
	show(st.GetResource(ctx, r.ID))

	claims, err := st.ClaimResources(ctx, store.ClaimParams{Owner: "test", Limit: 1, Duration: time.Minute})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v, %d claims", err, len(claims))
	}
	if err := st.Heartbeat(ctx, claims[0], time.Minute, &store.Progress{Message: "step " + secret, Conditions: conds}); err != nil {
		t.Fatal(err)
	}
	show(st.GetResource(ctx, r.ID))
	record := &store.ReconcileRecord{ResourceID: r.ID, Kind: "Widget", Name: "a", Generation: 1, Trigger: store.TriggerCreate,
		Phase: "applying", StartedAt: time.Now(), FinishedAt: time.Now(), Error: "failed for " + secret, PlanOutput: "~ " + secret,
		Outputs: json.RawMessage(`["` + secret + `"]`)}
	show(st.CompleteReconcile(ctx, claims[0], store.Completion{Status: store.StatusUpdate{Phase: manifest.PhaseFailed,
		Message: "done " + secret, Conditions: conds, Outputs: json.RawMessage(`{"k": "` + secret + `"}`)}, Record: record}))
	if record.Error != "failed for "+secret {
		t.Error("the caller's record was changed")
	}
	show(st.AddReconcileRecord(ctx, record))
	show(st.ListReconcileRecords(ctx, r.ID, 0))

	err = st.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if _, err := tx.PutSource(ctx, &store.Source{Name: "infra", Kind: store.SourceGit, Phase: store.SourceFailed,
			Message: "fetch " + secret, LastCommit: manifest.Commit{Message: "add " + secret},
			Errors: []manifest.Problem{{File: "a.yaml", Message: "bad " + secret}}}); err != nil {
			return err
		}
		_, err := tx.AddSyncRecord(ctx, &store.SyncRecord{Source: "infra", Message: "sync " + secret,
			Commit: manifest.Commit{Message: "add " + secret}, Errors: []manifest.Problem{{File: "a.yaml", Message: "bad " + secret}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	show(st.GetSource(ctx, "infra"))
	show(st.ListSyncRecords(ctx, "infra", 0))
	show(st.SuspendResource(ctx, r.ID, true, store.Suspension{Reason: "rotating " + secret, Identity: "ops"}))
	show(st.SuspendSource(ctx, "infra", store.SuspendedByAPI, true, store.Suspension{Reason: "paused " + secret}))
	show(st.ListGenerationSpecs(ctx, r.ID, 0))
	show(st.GetGenerationSpec(ctx, r.ID, 1))

	got, err := backend.GetResource(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Spec) != spec {
		t.Errorf("the spec was changed: %s", got.Spec)
	}
	if text := strings.ReplaceAll(seen.String(), spec, ""); strings.Contains(text, secret) {
		t.Errorf("the secret was stored:\n%s", seen.String())
	}
	for _, want := range []string{`"StatusMessage":"login ***"`, `"message":"as ***"`, `"StatusMessage":"step ***"`,
		`"StatusMessage":"done ***"`, `"Error":"failed for ***"`, `"PlanOutput":"~ ***"`, `"Message":"fetch ***"`,
		`"Message":"sync ***"`, `"message":"bad ***"`, `"message":"add ***"`, `"Outputs":{"***":"***"}`,
		`"SuspendedReason":"rotating ***"`, `"SuspendedReason":"paused ***"`,
		`[{"ResourceID":1,"Kind":"Widget","Namespace":"","Name":"a","Generation":1,"Spec":{"token":"***"}`,
		`{"ResourceID":1,"Kind":"Widget","Namespace":"","Name":"a","Generation":1,"Spec":{"token":"***"}`} {
		if !strings.Contains(seen.String(), want) {
			t.Errorf("no %s in what was stored:\n%s", want, seen.String())
		}
	}
}

// TestMasksBatchCompletions writes completions with a secret in a batch:
// their status and history are masked like a single completion's.
func TestMasksBatchCompletions(t *testing.T) {
	t.Parallel()
	const secret = "tok-77b0c4e2f1"
	ctx := t.Context()
	backend, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(backend.Close)
	if err := backend.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	st := masked.New(backend, redact.New(secret))
	src := store.SourceRef{Name: "infra", Path: "a.yaml"}
	for _, name := range []string{"a", "b"} {
		if _, err := st.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1", Name: name,
			Spec: json.RawMessage(`{}`), SpecHash: "sha256:1"}, src); err != nil {
			t.Fatal(err)
		}
	}
	claims, err := st.ClaimResources(ctx, store.ClaimParams{Owner: "test", Limit: 2, Duration: time.Minute})
	if err != nil || len(claims) != 2 {
		t.Fatalf("claim: %v, %d claims", err, len(claims))
	}
	var batch []store.ClaimCompletion
	for _, c := range claims {
		at := time.Now()
		batch = append(batch, store.ClaimCompletion{Claim: c, Done: store.Completion{
			Status: store.StatusUpdate{Phase: manifest.PhaseFailed, Message: "done " + secret,
				Conditions: []manifest.Condition{{Type: manifest.ConditionReady, Status: manifest.ConditionFalse, Reason: "Failed", Message: "as " + secret}}},
			Record: &store.ReconcileRecord{ResourceID: c.ID, Kind: c.Kind, Name: c.Name, Generation: 1, Trigger: store.TriggerCreate,
				Phase: "applying", Error: "failed for " + secret, StartedAt: at, FinishedAt: at},
		}})
	}
	for _, res := range st.CompleteReconciles(ctx, batch) {
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if batch[0].Done.Status.Message != "done "+secret || batch[0].Done.Record.Error != "failed for "+secret {
		t.Error("the caller's completion was changed")
	}
	for _, c := range claims {
		r, err := backend.GetResource(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		hist, err := backend.ListReconcileRecords(ctx, c.ID, 0)
		if err != nil || len(hist) != 1 {
			t.Fatalf("history: %v, %d records", err, len(hist))
		}
		if r.StatusMessage != "done ***" || r.Conditions[0].Message != "as ***" || hist[0].Error != "failed for ***" {
			t.Errorf("%s stored: message %q condition %q history error %q", c.Name, r.StatusMessage, r.Conditions[0].Message, hist[0].Error)
		}
	}
}
