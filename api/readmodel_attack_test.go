package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/why"
)

// TestReadModelSeesEveryWritePath changes rows through each write path of
// the store (labels, status, suspension, reconcile requests, leases,
// outputs, deletion requests, deletion then re-creation under the same
// name, deprecated types, suspended sources), and after each reads at a
// version fenced after it: the API answers what the store has, by id, by
// name and in a list, on both stores.
func TestReadModelSeesEveryWritePath(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			st := openBackend(t, backend)
			syncer := syncNetworks(t, st)
			_, hs := serve(t, api.Options{Store: st, Syncer: syncer, WriteToken: writeToken})
			vpc, err := st.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Network", Namespace: "default", Name: "prod-vpc"})
			if err != nil {
				t.Fatal(err)
			}
			id := vpc.ID
			check := func(step string) {
				t.Helper()
				v, err := st.Fence(ctx)
				if err != nil {
					t.Fatal(err)
				}
				want, err := st.GetResource(ctx, id)
				if errors.Is(err, store.ErrNotFound) {
					want = nil
				} else if err != nil {
					t.Fatal(err)
				}
				status, body, _ := versionedCall(t, hs.URL, "GET", "/api/v1/resources/"+strconv.FormatInt(id, 10), "", v)
				switch {
				case want == nil && status != http.StatusNotFound:
					t.Errorf("%s: resource %d is gone from the store, the API answers %d %s", step, id, status, body)
				case want != nil:
					var got api.Resource
					if status != http.StatusOK || json.Unmarshal(body, &got) != nil {
						t.Fatalf("%s: GET by id = %d %s", step, status, body)
					}
					// The explanation is computed at the read, from other
					// rows too: there is one exactly when the resource is
					// not ready or is suspended.
					if (got.Why != nil) != why.Explained(want) {
						t.Errorf("%s: the API's why is %+v for a resource that is ready %t, suspended %t", step, got.Why, why.Ready(want), want.Suspended())
					}
					got.Why = nil
					if w, g := normalized(t, api.NewResource(want)), normalized(t, got); !reflect.DeepEqual(w, g) {
						t.Errorf("%s: the API answers\n%v\nthe store has\n%v", step, g, w)
					}
				}
				// By name and in a list: the row the store has under the name.
				byName, err := st.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Network", Namespace: "default", Name: "prod-vpc"})
				if errors.Is(err, store.ErrNotFound) {
					byName = nil
				} else if err != nil {
					t.Fatal(err)
				}
				status, body, _ = versionedCall(t, hs.URL, "GET", "/api/v1/resources/by-name/Network/v1/prod-vpc", "", v)
				var got api.Resource
				switch {
				case byName == nil && status != http.StatusNotFound:
					t.Errorf("%s: by name: gone from the store, the API answers %d %s", step, status, body)
				case byName != nil && (status != http.StatusOK || json.Unmarshal(body, &got) != nil || got.ID != byName.ID):
					t.Errorf("%s: by name = %d %s, the store has id %d", step, status, body, byName.ID)
				}
				status, body, _ = versionedCall(t, hs.URL, "GET", "/api/v1/resources?kind=Network", "", v)
				var page []api.Resource
				if status != http.StatusOK || json.Unmarshal(body, &page) != nil {
					t.Fatalf("%s: list = %d %s", step, status, body)
				}
				wantList, err := st.ListResources(ctx, store.ResourceFilter{Kind: "Network"})
				if err != nil {
					t.Fatal(err)
				}
				if len(page) != len(wantList) {
					t.Errorf("%s: the list has %d resources, the store %d", step, len(page), len(wantList))
				}
			}
			check("synced")
			r := vpc.Resource
			r.Labels = map[string]string{"team": "net"}
			r.Annotations = map[string]string{"owner": "alice"}
			if _, _, err := st.ApplyResource(ctx, &r, vpc.Source); err != nil {
				t.Fatal(err)
			}
			check("labels and annotations")
			if _, err := st.SetResourceStatus(ctx, id, store.StatusUpdate{Phase: manifest.PhaseFailed, Message: "boom"}); err != nil {
				t.Fatal(err)
			}
			check("status")
			if _, err := st.SuspendResource(ctx, id, true, store.Suspension{}); err != nil {
				t.Fatal(err)
			}
			check("suspended")
			if _, err := st.SuspendResource(ctx, id, false, store.Suspension{}); err != nil {
				t.Fatal(err)
			}
			check("resumed")
			if _, err := st.RequestReconcile(ctx, id); err != nil {
				t.Fatal(err)
			}
			check("reconcile requested")
			claims, err := st.ClaimResources(ctx, store.ClaimParams{Owner: "agent-x", Limit: 10, Duration: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if len(claims) == 0 {
				t.Fatal("nothing claimed")
			}
			check("leased")
			if err := st.Heartbeat(ctx, claims[0], 2*time.Minute, nil); err != nil {
				t.Fatal(err)
			}
			check("lease extended")
			if _, err := st.CompleteReconcile(ctx, claims[0], store.Completion{Status: store.StatusUpdate{Phase: manifest.PhaseReady,
				ObservedGeneration: claims[0].Generation, Outputs: json.RawMessage(`{"vpc_id":"vpc-123"}`)}}); err != nil {
				t.Fatal(err)
			}
			check("completed with outputs")
			if _, err := st.RequestDeletion(ctx, id); err != nil {
				t.Fatal(err)
			}
			check("deletion requested")
			if err := st.DeleteResource(ctx, id); err != nil {
				t.Fatal(err)
			}
			check("deleted")
			again, err := st.CreateResource(ctx, &r, vpc.Source)
			if err != nil {
				t.Fatal(err)
			}
			check("old id after re-creation")
			id = again.ID
			check("re-created")

			// Types and sources.
			nt, err := st.GetResourceTypeByName(ctx, "Network", "v1")
			if err != nil {
				t.Fatal(err)
			}
			nt.Deprecated = true
			if _, err := st.PutResourceType(ctx, nt); err != nil {
				t.Fatal(err)
			}
			v, err := st.Fence(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ty api.ResourceType
			status, body, _ := versionedCall(t, hs.URL, "GET", fmt.Sprintf("/api/v1/resource-types/%d", nt.ID), "", v)
			if status != http.StatusOK || json.Unmarshal(body, &ty) != nil || ty.Status != api.TypeDeprecated {
				t.Errorf("deprecated type = %d %s", status, body)
			}
			if _, err := st.SuspendSource(ctx, "infra", "api", true, store.Suspension{}); err != nil {
				t.Fatal(err)
			}
			if v, err = st.Fence(ctx); err != nil {
				t.Fatal(err)
			}
			var src api.Source
			status, body, _ = versionedCall(t, hs.URL, "GET", "/api/v1/sources/infra", "", v)
			want, err := st.GetSource(ctx, "infra")
			if err != nil {
				t.Fatal(err)
			}
			if status != http.StatusOK || json.Unmarshal(body, &src) != nil ||
				!reflect.DeepEqual(normalized(t, src), normalized(t, api.NewSource(want))) {
				t.Errorf("suspended source = %d %s", status, body)
			}
		})
	}
}

// TestReadModelCursorAtTheEnd: a page after the largest ID there can be is
// empty, as the store answers it, not the first page again.
func TestReadModelCursorAtTheEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var page []api.Resource
	e.must("GET", "/api/v1/resources?after=9223372036854775807", "", "", http.StatusOK, &page)
	if len(page) != 0 {
		t.Errorf("a page after id %d lists %d resources, the first %d", int64(1<<63-1), len(page), page[0].ID)
	}
}
