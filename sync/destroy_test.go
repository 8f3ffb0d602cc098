package sync_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/admission"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/sqlite"
	"github.com/no8s/no8s-agent/sync"
)

// gate holds the first hook request it matches until it is released, so
// that a test can act while a hook has not answered yet.
type gate struct {
	match   func(hookRequest) bool
	armed   atomic.Bool
	entered chan hookRequest
	release chan struct{}
	stop    chan struct{}
}

// newGate returns an armed gate.
func newGate(match func(hookRequest) bool) *gate {
	g := &gate{match: match, entered: make(chan hookRequest, 1), release: make(chan struct{}), stop: make(chan struct{})}
	g.armed.Store(true)
	return g
}

// letGoAtEnd lets go of a held request when the test ends. Call it after
// the hook server is made, so that this runs before the server's Close,
// which waits for the held request.
func (g *gate) letGoAtEnd(t *testing.T) {
	t.Cleanup(func() { close(g.stop) })
}

// hold blocks r when it is the first request the gate matches.
func (g *gate) hold(r hookRequest) {
	if !g.match(r) || !g.armed.CompareAndSwap(true, false) {
		return
	}
	g.entered <- r
	select {
	case <-g.release:
	case <-g.stop:
	}
}

// waitHeld waits until the gate holds a request.
func (g *gate) waitHeld(t *testing.T) hookRequest {
	t.Helper()
	select {
	case r := <-g.entered:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("the hook was not asked within 30s")
		return hookRequest{}
	}
}

// outcome is the result of an operation run in the background.
type outcome struct {
	done chan struct{}
	err  error
}

func inBackground(fn func() error) *outcome {
	o := &outcome{done: make(chan struct{})}
	go func() {
		defer close(o.done)
		o.err = fn()
	}()
	return o
}

func (o *outcome) finished() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

func (o *outcome) wait(t *testing.T, what string) error {
	t.Helper()
	select {
	case <-o.done:
		return o.err
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not end within 60s", what)
		return nil
	}
}

// newSQLiteStore returns a migrated embedded store in a fresh file.
func newSQLiteStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "no8s.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}

// backends are the stores the concurrency tests run on.
var backends = []struct {
	name string
	open func(t *testing.T) store.Store
}{
	{"sqlite", func(t *testing.T) store.Store { return newSQLiteStore(t) }},
	{"postgres", func(t *testing.T) store.Store { st, _ := newStore(t); return st }},
}

// apiWidget writes a Widget through the API.
func apiWidget(ctx context.Context, s *sync.Syncer, name string, size int) (*sync.Written, error) {
	doc := fmt.Sprintf("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: %s}\nspec: {size: %d}\n", name, size)
	return s.ApplyDocument(ctx, func(context.Context, store.Store) ([]byte, error) { return []byte(doc), nil })
}

func mustAPIWidget(t *testing.T, s *sync.Syncer, name string, size int) *store.Resource {
	t.Helper()
	w, err := apiWidget(t.Context(), s, name, size)
	if err != nil {
		t.Fatalf("API write of %s: %v", name, err)
	}
	return w.Resource
}

// objectSize reads spec.size of a reviewed object.
func objectSize(obj json.RawMessage) int {
	var o struct {
		Spec struct{ Size int } `json:"spec"`
	}
	json.Unmarshal(obj, &o)
	return o.Spec.Size
}

// TestAdmissionEveryDestroyPath enumerates every way a resource's
// destruction is requested: each is put to the admission hooks as a
// deletion, a hook that refuses deletions stops it with nothing changed,
// and once the hook allows it the same call does request the destruction.
func TestAdmissionEveryDestroyPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// setup makes the victims exist and returns the call that destroys them.
		setup func(t *testing.T, s *sync.Syncer, st store.Store) func(ctx context.Context) error
		// victims are the Widgets the call destroys.
		victims []string
		// source, when set, must keep its phase through a refusal.
		source string
	}{
		{
			name: "sync removes a resource",
			setup: func(t *testing.T, s *sync.Syncer, _ store.Store) func(context.Context) error {
				mustSync(t, s, target("infra"), snapshot(map[string]string{"types.yaml": widgetType,
					"w.yaml": widget("a", "{size: 1}") + widget("gone", "{size: 1}")}))
				next := snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 1}")})
				return func(ctx context.Context) error { _, err := s.Sync(ctx, target("infra"), next, false); return err }
			},
			victims: []string{"gone"},
		},
		{
			name: "sync removes a type with its resources",
			setup: func(t *testing.T, s *sync.Syncer, _ store.Store) func(context.Context) error {
				mustSync(t, s, target("infra"), snapshot(map[string]string{"types.yaml": widgetType,
					"w.yaml": widget("a", "{size: 1}") + widget("b", "{size: 2}")}))
				tg := target("infra")
				tg.Prune.AllowEmpty = true
				tg.Prune.MaxDeletes = &sync.MaxDeletes{Value: 100, Percent: true}
				empty := snapshot(map[string]string{})
				return func(ctx context.Context) error { _, err := s.Sync(ctx, tg, empty, false); return err }
			},
			victims: []string{"a", "b"},
		},
		{
			name: "API deletes a resource",
			setup: func(t *testing.T, s *sync.Syncer, _ store.Store) func(context.Context) error {
				mustSync(t, s, target("types"), snapshot(map[string]string{"types.yaml": widgetType}))
				x := mustAPIWidget(t, s, "x", 1)
				return func(ctx context.Context) error { _, err := s.DeleteResource(ctx, x.ID); return err }
			},
			victims: []string{"x"},
		},
		{
			name: "orphaned source is pruned",
			setup: func(t *testing.T, s *sync.Syncer, _ store.Store) func(context.Context) error {
				mustSync(t, s, target("types"), snapshot(map[string]string{"types.yaml": widgetType}))
				mustSync(t, s, target("old"), snapshot(map[string]string{"w.yaml": widget("o1", "{size: 1}") + widget("o2", "{size: 2}")}))
				if _, err := s.MarkOrphans(t.Context(), []string{"types"}); err != nil {
					t.Fatal(err)
				}
				return func(ctx context.Context) error {
					_, err := s.RemoveSource(ctx, "old", sync.ModePrune, true)
					return err
				}
			},
			victims: []string{"o1", "o2"},
			source:  "old",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st, _ := newStore(t)
			ctx := t.Context()
			var frozen atomic.Bool
			hook := newHook(t, "hook-secret-1", func(r hookRequest) map[string]any {
				if r.Operation == "delete" && frozen.Load() {
					return map[string]any{"allowed": false, "status": map[string]any{"message": "deletions are frozen"}}
				}
				return map[string]any{"allowed": true}
			})
			c, _ := chain(t, admission.Hook{Name: "freeze", URL: hook.URL, Type: admission.Validating})
			s := sync.New(st, nil)
			s.UseAdmission(c)
			destroy := tt.setup(t, s, st)
			var phase store.SourcePhase
			if tt.source != "" {
				src, err := st.GetSource(ctx, tt.source)
				if err != nil {
					t.Fatal(err)
				}
				phase = src.Phase
			}
			frozen.Store(true)
			asked := len(hook.requests())

			err := destroy(ctx)
			var serr *sync.Error
			if !errors.As(err, &serr) || serr.Reason != sync.ReasonAdmissionDenied || !strings.Contains(err.Error(), "deletions are frozen") ||
				!strings.Contains(err.Error(), "freeze") {
				t.Fatalf("destroy under a hook that refuses deletions: %v; want an AdmissionDenied refusal naming the hook and its message", err)
			}
			reviewed := map[string]bool{}
			for _, r := range hook.requests()[asked:] {
				if r.Operation == "delete" && r.Kind == "Widget" && strings.Contains(string(r.OldObject), `"name":"`+r.Name+`"`) {
					reviewed[r.Name] = true
				}
			}
			for _, name := range tt.victims {
				if !reviewed[name] {
					t.Errorf("the hook was not asked about the deletion of %s (asked: %v)", name, reviewed)
				}
				r := get(t, st, "Widget", name)
				if r.DeletionRequestedAt != nil || r.Phase == manifest.PhaseDeleting {
					t.Errorf("%s was marked for destruction despite the refusal: phase %s", name, r.Phase)
				}
			}
			if tt.source != "" {
				if src, err := st.GetSource(ctx, tt.source); err != nil || src.Phase != phase {
					t.Errorf("source %s after the refusal: %+v, %v; want it %s as before", tt.source, src, err, phase)
				}
			}

			// The same call goes through once the hook allows it: the path
			// does destroy, and only the hook stood in its way.
			frozen.Store(false)
			if err := destroy(ctx); err != nil {
				t.Fatalf("destroy once the hook allows it: %v", err)
			}
			for _, name := range tt.victims {
				if r := get(t, st, "Widget", name); r.DeletionRequestedAt == nil {
					t.Errorf("%s was not marked for destruction once the hook allowed it", name)
				}
			}
		})
	}
}

// oneDoor is a call that only one function may make.
type oneDoor struct {
	// methods are the names of the methods called.
	methods []string
	// file and fn are where they may be called.
	file, fn string
	// outside are the folders whose code may call them too: those that
	// implement them.
	outside []string
	what    string
}

// doors: destructions are requested only by requestDestroys, which insists
// on what the admission hooks allowed; the hooks are called only by admit.
var doors = []oneDoor{
	{methods: []string{"RequestDeletion", "RequestDeletions"}, file: "sync/destroy.go", fn: "requestDestroys",
		outside: []string{"store"}, what: "a destruction requested"},
	{methods: []string{"Review"}, file: "sync/admission.go", fn: "admit",
		outside: []string{"admission"}, what: "admission hooks called"},
}

// TestDestroyRequestsOnlyThroughReview parses the agent's code and fails
// when a destruction (store.Store's RequestDeletion or RequestDeletions)
// is requested anywhere but in requestDestroys, or the admission hooks are
// called anywhere but in admit: a new path that destroys must go through
// the admission review there.
func TestDestroyRequestsOnlyThroughReview(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	type file struct {
		rel  string
		fset *token.FileSet
		ast  *ast.File
	}
	var files []file
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == "testdata" || d.Name() == "node_modules" || (strings.HasPrefix(d.Name(), ".") && rel != ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, file{rel: rel, fset: fset, ast: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, door := range doors {
		var callers []string
		allowed := 0
		for _, f := range files {
			if slices.ContainsFunc(door.outside, func(dir string) bool { return strings.HasPrefix(f.rel, dir+"/") }) {
				continue
			}
			for _, decl := range f.ast.Decls {
				fn, _ := decl.(*ast.FuncDecl)
				// Every mention counts, not only calls: a method value
				// (f := tx.RequestDeletions) or expression
				// (store.Store.RequestDeletions) is called elsewhere.
				ast.Inspect(decl, func(n ast.Node) bool {
					sel, ok := n.(*ast.SelectorExpr)
					if !ok || !slices.Contains(door.methods, sel.Sel.Name) {
						return true
					}
					where := "package level"
					if fn != nil {
						where = fn.Name.Name
					}
					if f.rel == door.file && where == door.fn {
						allowed++
						return true
					}
					callers = append(callers, fmt.Sprintf("%s (%s): %s", f.fset.Position(sel.Pos()), where, sel.Sel.Name))
					return true
				})
			}
		}
		if len(callers) > 0 {
			t.Errorf("%s outside %s in %s:\n%s", door.what, door.fn, door.file, strings.Join(callers, "\n"))
		}
		if allowed == 0 {
			t.Errorf("%s in %s makes no call of %v: the guard looks at the wrong place", door.fn, door.file, door.methods)
		}
	}
}

// TestAdmissionHooksOutsideLocks holds a hook's answer while a sync, an
// API write, an API deletion or a prune waits for it: operations that have
// nothing to do with the change (a reconcile request, a worker's claim, an
// API write of another resource, a sync of another source) go on at once,
// on either store, and the held change is applied once the hook answers.
func TestAdmissionHooksOutsideLocks(t *testing.T) {
	t.Parallel()
	blockers := []struct {
		name string
		// setup prepares the held change and returns it; check looks at
		// what it did once the hook let it through.
		setup func(t *testing.T, s *sync.Syncer) func(ctx context.Context) error
		check func(t *testing.T, st store.Store)
	}{
		{
			name: "sync",
			setup: func(t *testing.T, s *sync.Syncer) func(context.Context) error {
				snap := snapshot(map[string]string{"w.yaml": widget("slow-1", "{size: 1}")})
				return func(ctx context.Context) error { _, err := s.Sync(ctx, target("slow"), snap, false); return err }
			},
			check: func(t *testing.T, st store.Store) { get(t, st, "Widget", "slow-1") },
		},
		{
			name: "API write",
			setup: func(t *testing.T, s *sync.Syncer) func(context.Context) error {
				return func(ctx context.Context) error { _, err := apiWidget(ctx, s, "slow-1", 1); return err }
			},
			check: func(t *testing.T, st store.Store) { get(t, st, "Widget", "slow-1") },
		},
		{
			name: "API deletion",
			setup: func(t *testing.T, s *sync.Syncer) func(context.Context) error {
				r := mustAPIWidget(t, s, "slow-1", 1)
				return func(ctx context.Context) error { _, err := s.DeleteResource(ctx, r.ID); return err }
			},
			check: func(t *testing.T, st store.Store) {
				if r := get(t, st, "Widget", "slow-1"); r.DeletionRequestedAt == nil {
					t.Errorf("slow-1 is not marked for destruction after the hook allowed it")
				}
			},
		},
		{
			name: "prune",
			setup: func(t *testing.T, s *sync.Syncer) func(context.Context) error {
				mustSync(t, s, target("slow"), snapshot(map[string]string{"w.yaml": widget("slow-1", "{size: 1}")}))
				if _, err := s.MarkOrphans(t.Context(), []string{"types", "other"}); err != nil {
					t.Fatal(err)
				}
				return func(ctx context.Context) error {
					_, err := s.RemoveSource(ctx, "slow", sync.ModePrune, true)
					return err
				}
			},
			check: func(t *testing.T, st store.Store) {
				if r := get(t, st, "Widget", "slow-1"); r.DeletionRequestedAt == nil {
					t.Errorf("slow-1 is not marked for destruction after the hook allowed the prune")
				}
			},
		},
	}
	for _, b := range backends {
		for _, bl := range blockers {
			t.Run(b.name+"/"+bl.name, func(t *testing.T) {
				t.Parallel()
				st := b.open(t)
				ctx := t.Context()
				g := newGate(func(r hookRequest) bool { return strings.HasPrefix(r.Name, "slow") })
				g.armed.Store(false)
				hook := newHook(t, "hook-secret-1", func(r hookRequest) map[string]any {
					g.hold(r)
					return map[string]any{"allowed": true}
				})
				g.letGoAtEnd(t)
				c, _ := chain(t, admission.Hook{Name: "slow", URL: hook.URL, Type: admission.Validating,
					Timeout: admission.Duration{Duration: admission.MaxTimeout}})
				s := sync.New(st, nil)
				s.UseAdmission(c)
				mustSync(t, s, target("types"), snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("w0", "{size: 1}")}))
				w0 := get(t, st, "Widget", "w0")
				held := bl.setup(t, s)

				g.armed.Store(true)
				blocked := inBackground(func() error { return held(ctx) })
				g.waitHeld(t)

				// Each runs with a deadline far below the hook's timeout:
				// if it waits for the held change, it fails.
				ops := []struct {
					name string
					run  func(ctx context.Context, i int) error
				}{
					{"reconcile request", func(ctx context.Context, _ int) error {
						_, err := st.RequestReconcile(ctx, w0.ID)
						return err
					}},
					{"claim", func(ctx context.Context, _ int) error {
						_, err := st.ClaimResources(ctx, store.ClaimParams{Owner: "worker-1", Limit: 1, Duration: time.Minute})
						return err
					}},
					{"API write of another resource", func(ctx context.Context, i int) error {
						_, err := apiWidget(ctx, s, fmt.Sprintf("other-%d", i), 1)
						return err
					}},
					{"sync of another source", func(ctx context.Context, i int) error {
						_, err := s.Sync(ctx, target("other"), snapshot(map[string]string{"w.yaml": widget(fmt.Sprintf("other-src-%d", i), "{size: 1}")}), false)
						return err
					}},
				}
				for i, op := range ops {
					opCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
					err := op.run(opCtx, i)
					cancel()
					if err != nil {
						t.Errorf("%s while a hook holds the %s: %v", op.name, bl.name, err)
					}
					if blocked.finished() {
						t.Fatalf("the %s ended before its hook answered: %v", bl.name, blocked.err)
					}
				}

				close(g.release)
				if err := blocked.wait(t, "the "+bl.name); err != nil {
					t.Fatalf("the %s once its hook answered: %v", bl.name, err)
				}
				bl.check(t, st)
			})
		}
	}
}

// TestAdmissionReviewsWhatIsApplied changes the store between the review
// of a change and its application: the change is reviewed again as it now
// is, and the stale review is not applied. A deletion reviewed while the
// resource was small is refused once it grew; an API write is reviewed
// again against the resource another write left.
func TestAdmissionReviewsWhatIsApplied(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name+"/sync deletion", func(t *testing.T) {
			t.Parallel()
			st := b.open(t)
			ctx := t.Context()
			g := newGate(func(r hookRequest) bool { return r.Operation == "delete" && r.Name == "w" })
			hook := newHook(t, "hook-secret-1", func(r hookRequest) map[string]any {
				g.hold(r)
				if r.Operation == "delete" && objectSize(r.OldObject) > 5 {
					return map[string]any{"allowed": false, "status": map[string]any{"message": "large widgets stay"}}
				}
				return map[string]any{"allowed": true}
			})
			g.letGoAtEnd(t)
			c, _ := chain(t, admission.Hook{Name: "sizes", URL: hook.URL, Type: admission.Validating})
			agent1, agent2 := admittedPair(st, c)
			mustSync(t, agent1, target("infra"), snapshot(map[string]string{"types.yaml": widgetType,
				"w.yaml": widget("w", "{size: 1}") + widget("keep", "{size: 1}")}))

			drop := snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("keep", "{size: 1}")})
			dropping := inBackground(func() error { _, err := agent1.Sync(ctx, target("infra"), drop, false); return err })
			if r := g.waitHeld(t); objectSize(r.OldObject) != 1 {
				t.Fatalf("the first review of the deletion saw %s", r.OldObject)
			}
			// Another agent makes w large while the deletion is reviewed.
			growCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := agent2.Sync(growCtx, target("infra"), snapshot(map[string]string{"types.yaml": widgetType,
				"w.yaml": widget("w", "{size: 9}") + widget("keep", "{size: 1}")}), false)
			cancel()
			if err != nil {
				t.Fatalf("growing w while the deletion is reviewed: %v", err)
			}
			close(g.release)
			err = dropping.wait(t, "the sync that drops w")
			var serr *sync.Error
			if !errors.As(err, &serr) || serr.Reason != sync.ReasonAdmissionDenied || !strings.Contains(err.Error(), "large widgets stay") {
				t.Fatalf("the deletion of w, grown since its review: %v; want it reviewed again and refused", err)
			}
			var sizes []int
			for _, r := range hook.requests() {
				if r.Operation == "delete" && r.Name == "w" {
					sizes = append(sizes, objectSize(r.OldObject))
				}
			}
			if len(sizes) != 2 || sizes[1] != 9 {
				t.Errorf("the deletion reviews of w saw sizes %v; want 1, then 9 after it grew", sizes)
			}
			if w := get(t, st, "Widget", "w"); w.DeletionRequestedAt != nil || objectSize(mustObject(t, w)) != 9 {
				t.Errorf("w after the refusal: deletion %v spec %s; want it kept at size 9", w.DeletionRequestedAt, w.Spec)
			}
		})
		t.Run(b.name+"/API write", func(t *testing.T) {
			t.Parallel()
			st := b.open(t)
			ctx := t.Context()
			g := newGate(func(r hookRequest) bool { return r.Operation == "update" && r.Name == "x" })
			hook := newHook(t, "hook-secret-1", func(r hookRequest) map[string]any {
				g.hold(r)
				return map[string]any{"allowed": true}
			})
			g.letGoAtEnd(t)
			c, _ := chain(t, admission.Hook{Name: "watch", URL: hook.URL, Type: admission.Validating})
			agent1, agent2 := admittedPair(st, c)
			mustSync(t, agent1, target("types"), snapshot(map[string]string{"types.yaml": widgetType}))
			mustAPIWidget(t, agent1, "x", 1)

			writing := inBackground(func() error { _, err := apiWidget(ctx, agent1, "x", 2); return err })
			if r := g.waitHeld(t); objectSize(r.OldObject) != 1 {
				t.Fatalf("the first review of the write saw %s", r.OldObject)
			}
			otherCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := apiWidget(otherCtx, agent2, "x", 7)
			cancel()
			if err != nil {
				t.Fatalf("another write of x while the first is reviewed: %v", err)
			}
			close(g.release)
			if err := writing.wait(t, "the held write"); err != nil {
				t.Fatalf("the held write: %v", err)
			}
			var olds []int
			for _, r := range hook.requests() {
				if r.Operation == "update" && r.Name == "x" && objectSize(r.Object) == 2 {
					olds = append(olds, objectSize(r.OldObject))
				}
			}
			if len(olds) != 2 || olds[1] != 7 {
				t.Errorf("the reviews of the write of size 2 saw old sizes %v; want 1, then 7 after the other write", olds)
			}
			if x := get(t, st, "Widget", "x"); objectSize(mustObject(t, x)) != 2 || x.Generation != 3 {
				t.Errorf("x: generation %d spec %s; want generation 3, size 2", x.Generation, x.Spec)
			}
		})
	}
}

func mustObject(t *testing.T, r *store.Resource) json.RawMessage {
	t.Helper()
	obj, err := r.Object()
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestAdmissionPlanKeepsMoving changes the reviewed resource each time a
// hook reviews it: the sync gives up after a few reviews with a retryable
// error, and applies nothing it did not have reviewed.
func TestAdmissionPlanKeepsMoving(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	ctx := t.Context()
	mover := sync.New(st, nil) // an agent without hooks
	var mu gosync.Mutex
	size := 1
	hook := newHook(t, "hook-secret-1", func(r hookRequest) map[string]any {
		if r.Operation == "delete" && r.Name == "w" {
			mu.Lock()
			size++
			n := size
			mu.Unlock()
			if _, err := mover.Sync(ctx, target("infra"), snapshot(map[string]string{"types.yaml": widgetType,
				"w.yaml": widget("w", fmt.Sprintf("{size: %d}", n)) + widget("keep", "{size: 1}")}), false); err != nil {
				t.Errorf("moving w during its review: %v", err)
			}
		}
		return map[string]any{"allowed": true}
	})
	c, _ := chain(t, admission.Hook{Name: "moving", URL: hook.URL, Type: admission.Validating})
	s := sync.New(st, nil)
	s.UseAdmission(c)
	mustSync(t, s, target("infra"), snapshot(map[string]string{"types.yaml": widgetType,
		"w.yaml": widget("w", "{size: 1}") + widget("keep", "{size: 1}")}))

	_, err := s.Sync(ctx, target("infra"), snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("keep", "{size: 1}")}), false)
	var serr *sync.Error
	if err == nil || errors.As(err, &serr) || !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("a sync whose resources keep changing under review: %v; want a retryable conflict", err)
	}
	reviews := 0
	for _, r := range hook.requests() {
		if r.Operation == "delete" && r.Name == "w" {
			reviews++
		}
	}
	if reviews != 3 {
		t.Errorf("%d reviews of the deletion of w; want 3, then give up", reviews)
	}
	if w := get(t, st, "Widget", "w"); w.DeletionRequestedAt != nil {
		t.Errorf("w was marked for destruction though every review of it went stale")
	}
}

// admittedPair returns two syncers of st, as two agents sharing its
// database would run, both with the admission chain c.
func admittedPair(st store.Store, c *admission.Chain) (*sync.Syncer, *sync.Syncer) {
	agent1, agent2 := sync.New(st, nil), sync.New(st, nil)
	agent1.UseAdmission(c)
	agent2.UseAdmission(c)
	return agent1, agent2
}
