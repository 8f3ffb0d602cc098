package api

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"sync/atomic"
	"time"
	"unique"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/why"
)

// The API answers reads of resources, sources and types from a copy held
// in memory, so that readers never wait for the database nor take its
// connections from the reconciler, and a read costs what encoding it
// costs, or less: each resource is kept as the JSON the API sends.
//
// The copy is a projection of the store, kept current from the store's
// notifications: a resource's status change (store.TopicStatus), any other
// change of a row (store.TopicChanges), each naming the row, which the
// model then reads again. It never trusts a payload for the content, so
// reading a row twice, or late, does no harm: it always ends with the row
// as the store has it. When notifications may have been lost (the
// listening connection dropped, or this process fell behind) the store
// says so with a Resync, and the copy is built again from scratch.
//
// Store versions give read-your-writes across agents. Each API write
// answers with the version of a fence the agent issues after it commits
// (No8s-Store-Version); a read that names a version (No8s-Min-Version or
// ?minVersion=) waits until the copy has heard that version, and so every
// change committed before it.

// Headers of store versions.
const (
	// HeaderStoreVersion, on the answer to a write, is a store version
	// issued after the write committed.
	HeaderStoreVersion = "No8s-Store-Version"
	// HeaderMinVersion, on a read, asks for an answer that includes every
	// write committed before that version was issued.
	HeaderMinVersion = "No8s-Min-Version"
	// minVersionParam is the query parameter that does the same.
	minVersionParam = "minVersion"
)

// HeaderDefaultNamespace, on a list of resources, is the agent's default
// namespace: where resources declared without one are, and so what a
// reference that names none means.
const HeaderDefaultNamespace = "No8s-Default-Namespace"

// Bounds of the read model.
const (
	// DefaultReadWait is how long a read waits for the copy to reach the
	// version it asks for, or to be built, before it is answered 503.
	DefaultReadWait = 5 * time.Second
	// modelPage is how many resources a build reads per query.
	modelPage = 2000
	// maxWaitingReads is how many reads may wait for the copy at once.
	maxWaitingReads = 4096
	// modelBatch is the most notifications taken together before the rows
	// they name are read again.
	modelBatch = 8192
	// gatherFor is, during a burst of changes, the least time between two
	// reads of changed rows: the claims of a burst and the completions that
	// follow them milliseconds later are read once, not twice. A burst is
	// a batch of gatherAbove notifications or more: the few changes of a
	// one-file commit are read at once, each, and a read that waits for a
	// version cuts the gathering short.
	gatherFor   = 20 * time.Millisecond
	gatherAbove = 8
	// heartbeatEvery is how often the model issues a fence of its own, to
	// hear it back: a connection whose packets silently stop (no reset, no
	// close) looks, from this end, like a store where nothing changes.
	heartbeatEvery = time.Second
	// staleAfter is how long the model may go without hearing a fence it
	// issued before reads are refused and it listens afresh.
	staleAfter = 10 * time.Second
)

// modelResource is one resource as the copy keeps it: what filters and
// grants look at, and the JSON the API sends. It is never changed once in
// the copy: a change puts a new one in its place.
type modelResource struct {
	id                          int64
	kind, name, version, source string
	// namespace is "" for a resource of a cluster-scoped kind.
	namespace string
	action    string
	phase     manifest.Phase
	// labels are the resource's labels as key, value pairs: a map for
	// each of thousands of resources costs several times as much, and
	// filters only look a few of them up.
	labels []string
	// json is the resource as the API sends it or, once it is packed, that
	// compressed against dict; n is then the length of the JSON. (Fields
	// rather than a record of their own: thousands of resources are held.)
	json []byte
	dict *[]byte
	// madeAt is when it was read from the store, in Unix nanoseconds.
	madeAt int64
	n      int32
	// settling is true of a resource that is due or being reconciled: it
	// is about to change again, so packing it waits longer.
	settling bool
	// facts are what explaining it needs (see package why), kept for a
	// resource that is not ready or is suspended; nil for the others,
	// which are ready: most of them, whose explanation is none.
	facts *why.Resource
}

// readModel is the API's copy of the store.
type readModel struct {
	st   store.Store
	log  *slog.Logger
	wait time.Duration

	mu   gosync.RWMutex
	byID map[int64]*modelResource
	ids  []int64 // sorted
	// named finds the IDs of the resources of a kind and name, in every
	// namespace, for reads by name.
	named   map[kindName][]int64  // sorted
	sources []*store.Source       // by name
	types   []*store.ResourceType // by name, then version
	// agents are the agents that record themselves, by id, read again
	// every store.AgentBeat: explanations say whether a lease's holder
	// is alive.
	agents map[string]*store.Agent
	// ready is true once built and while current; false while a build
	// runs or the store cannot be read.
	ready bool
	// problem says why the copy is not ready; failing is true when that
	// is the store (down, or its notifications interrupted), which reads
	// are told at once rather than wait for.
	problem string
	failing bool
	// interrupted is true from an interruption of the store's
	// notifications to the Resync that follows; only run uses it.
	interrupted bool
	// version is the highest store version heard, with every change
	// before it applied.
	version int64
	// resourcesSeq changes with every change of the resources in the
	// copy: pages prepared at one value are the same at that value.
	resourcesSeq uint64
	// changed is closed and replaced whenever ready or version change.
	changed chan struct{}
	// fences are the heartbeat fences issued and not yet heard, oldest
	// first; heardAt is when the last one heard was issued (or the copy
	// built): what the copy is known to be current as of.
	fences  []issuedFence
	heardAt time.Time
	running atomic.Bool
	// burstAt is when the copy last applied a burst of changes (unix
	// nanoseconds); the packer waits for it to settle, unless more than
	// packBudget bytes wait to be packed.
	burstAt    atomic.Int64
	packBudget int
	// heartbeat is true when the store's notifications travel over a
	// connection that may stall unnoticed (not the embedded store's): then
	// the model issues the fences above and judges silence.
	heartbeat bool
	// released, when set, is told that packing let go of memory.
	released func()
	// waiting counts the reads waiting for the copy.
	waiting atomic.Int64
	// hurry tells the runner that a read waits for a version the copy has
	// not heard yet, so that it stops gathering notifications.
	hurry chan struct{}
}

// kindName is a resource's reference without its namespace.
type kindName struct{ kind, name string }

// ref returns the resource's full reference.
func (e *modelResource) ref() manifest.ObjectRef {
	return manifest.ObjectRef{Kind: e.kind, Namespace: e.namespace, Name: e.name}
}

// issuedFence is a heartbeat fence: its version, and when it was asked for.
type issuedFence struct {
	v  int64
	at time.Time
}

func newReadModel(st store.Store, log *slog.Logger, wait time.Duration) *readModel {
	if wait <= 0 {
		wait = DefaultReadWait
	}
	local, ok := st.(store.LocalNotifications)
	return &readModel{st: st, log: log, wait: wait, changed: make(chan struct{}), hurry: make(chan struct{}, 1),
		byID: map[int64]*modelResource{}, named: map[kindName][]int64{},
		problem: "the read model is being built", heartbeat: !ok || !local.NotificationsInProcess(),
		packBudget: packBusyBudget}
}

// errModelNotReady is a read the copy cannot answer yet (503).
type errModelNotReady struct{ why string }

func (e errModelNotReady) Error() string { return e.why }

// run keeps the copy current until ctx is done.
func (m *readModel) run(ctx context.Context) error {
	// One runner per copy: Serve runs it, and so may its caller.
	if !m.running.CompareAndSwap(false, true) {
		<-ctx.Done()
		return nil
	}
	defer m.running.Store(false)
	if m.heartbeat {
		beatDone := make(chan struct{})
		defer func() { <-beatDone }()
		go func() {
			defer close(beatDone)
			m.runHeartbeat(ctx)
		}()
	}
	agentsDone := make(chan struct{})
	defer func() { <-agentsDone }()
	go func() {
		defer close(agentsDone)
		m.runAgents(ctx)
	}()
	packerDone := make(chan struct{})
	defer func() { <-packerDone }()
	packing := false
	for ctx.Err() == nil {
		if !m.listen(ctx, func() {
			if !packing {
				packing = true
				go func() {
					defer close(packerDone)
					m.runPacker(ctx)
				}()
			}
		}) {
			break
		}
	}
	if !packing {
		close(packerDone)
	}
	return nil
}

// listen listens to the store, builds the copy and keeps it current until
// ctx is done (false) or the notifications stop being heard (true: listen
// again). built is called once the copy is built.
func (m *readModel) listen(ctx context.Context, built func()) bool {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var notes <-chan store.Notification
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		var err error
		if notes, err = m.st.Listen(lctx, store.TopicStatus, store.TopicChanges); err == nil {
			break
		}
		m.log.Warn("read model: cannot listen to the store; retrying", "error", err, "in", wait)
		m.fail(errStoreUnreadable)
		if !sleepCtx(ctx, wait) {
			return false
		}
	}
	// A new listener owes no Resync for what an abandoned one missed: the
	// build below covers it.
	m.interrupted = false
	// Listening first: whatever changes from here on is heard, so a build
	// misses nothing.
	if !m.rebuild(ctx) {
		return false
	}
	built()
	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	var (
		applied time.Time
		burst   bool
	)
	for {
		var batch []store.Notification
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
			select {
			case n, ok := <-notes:
				// Something waits: hear it before judging.
				if !ok {
					return ctx.Err() == nil
				}
				batch = append(batch, n)
			default:
				if m.stale(time.Now()) {
					m.log.Warn("read model: no notification heard from the store; listening afresh", "for", staleAfter)
					m.fail(fmt.Sprintf("the store's notifications have not been heard for %s; the read model listens afresh", staleAfter))
					return true
				}
				continue
			}
		case n, ok := <-notes:
			if !ok {
				return ctx.Err() == nil
			}
			batch = append(batch, n)
		}
	drain:
		for len(batch) < modelBatch {
			select {
			case n, ok := <-notes:
				if !ok {
					break drain
				}
				batch = append(batch, n)
			default:
				break drain
			}
		}
		if until := applied.Add(gatherFor); (burst || len(batch) >= gatherAbove) && len(batch) < modelBatch && time.Now().Before(until) {
			var open bool
			if batch, open = m.gather(ctx, notes, batch, until); !open {
				return ctx.Err() == nil
			}
		}
		if !m.apply(ctx, batch) {
			return false
		}
		applied, burst = time.Now(), len(batch) >= gatherAbove
		if burst {
			m.burstAt.Store(applied.UnixNano())
		}
	}
}

// gather adds to batch the notifications that arrive until the time given,
// a read hurries the copy, or the batch is full. It reports false when
// notes closed or ctx ended.
func (m *readModel) gather(ctx context.Context, notes <-chan store.Notification, batch []store.Notification, until time.Time) ([]store.Notification, bool) {
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	for len(batch) < modelBatch {
		select {
		case <-ctx.Done():
			return batch, false
		case n, ok := <-notes:
			if !ok {
				return batch, false
			}
			batch = append(batch, n)
		case <-m.hurry:
			return batch, true
		case <-t.C:
			return batch, true
		}
	}
	return batch, true
}

// runHeartbeat issues a fence every heartbeatEvery, which the copy hears
// back through the store's notifications, until ctx is done.
func (m *readModel) runHeartbeat(ctx context.Context) {
	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		at := time.Now()
		fctx, cancel := context.WithTimeout(ctx, heartbeatEvery)
		v, err := m.st.Fence(fctx)
		cancel()
		if err != nil {
			continue
		}
		m.mu.Lock()
		if len(m.fences) < 64 {
			m.fences = append(m.fences, issuedFence{v: v, at: at})
		}
		m.mu.Unlock()
	}
}

// heardLocked records that the copy has heard version v.
func (m *readModel) heardLocked(v int64) {
	i := 0
	for ; i < len(m.fences) && m.fences[i].v <= v; i++ {
		m.heardAt = later(m.heardAt, m.fences[i].at)
	}
	m.fences = m.fences[i:]
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// stale reports whether the copy has gone staleAfter without hearing
// from the store. Only the runner asks, when no notification waits: while
// it applies a long batch, the fences it has not read yet are not lost.
func (m *readModel) stale(now time.Time) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.staleLocked(now)
}

func (m *readModel) staleLocked(now time.Time) bool {
	return m.heartbeat && !m.heardAt.IsZero() && now.Sub(m.heardAt) > staleAfter
}

// sleepCtx waits d or until ctx is done, and says whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// changes are the rows a batch of notifications names.
type changes struct {
	resources      map[int64]bool
	sources, types bool
	version        int64
	// resync is true when notifications may have been lost before the
	// batch's end; interrupted when they are being lost at its end.
	resync, interrupted bool
}

func (m *readModel) parse(batch []store.Notification) changes {
	c := changes{resources: map[int64]bool{}}
	for _, n := range batch {
		switch {
		case n.Interrupted:
			c.interrupted = true
		case n.Resync:
			c.resync, c.interrupted = true, false
		case n.Topic == store.TopicStatus:
			// The row is read again: its id is all the event must say.
			id, err := store.StatusEventID(n.Payload)
			if err != nil {
				// Unreadable: whatever it said, a build catches up.
				m.log.Warn("read model: unreadable status notification; building afresh", "error", err)
				c.resync = true
				continue
			}
			c.resources[id] = true
		case n.Topic == store.TopicChanges:
			key := n.Payload
			switch {
			case strings.HasPrefix(key, store.ChangeResource):
				id, err := strconv.ParseInt(key[len(store.ChangeResource):], 10, 64)
				if err != nil {
					c.resync = true
					continue
				}
				c.resources[id] = true
			case strings.HasPrefix(key, store.ChangeSource):
				c.sources = true
			case strings.HasPrefix(key, store.ChangeType):
				c.types = true
			case strings.HasPrefix(key, store.ChangeVersion):
				if v, err := strconv.ParseInt(key[len(store.ChangeVersion):], 10, 64); err == nil {
					c.version = max(c.version, v)
				}
			}
		}
	}
	return c
}

// apply reads again what a batch names and puts it in the copy; then the
// copy has heard the batch's versions. It retries while the store cannot
// be read (reads are refused meanwhile), and returns false when ctx is
// done.
func (m *readModel) apply(ctx context.Context, batch []store.Notification) bool {
	c := m.parse(batch)
	switch {
	case c.interrupted:
		// Nothing read from now is known current: refuse reads until the
		// Resync, which builds the copy afresh.
		m.interrupted = true
		m.fail("the store's notifications were interrupted; the read model waits for them to resume")
		return true
	case c.resync:
		m.interrupted = false
		m.log.Warn("read model: notifications may have been lost; building it afresh")
		return m.rebuild(ctx)
	case m.interrupted:
		return true
	}
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := m.refresh(ctx, c)
		if err == nil {
			m.mu.Lock()
			m.version = max(m.version, c.version)
			m.heardLocked(m.version)
			m.ready, m.problem, m.failing = true, "", false
			m.broadcastLocked()
			m.mu.Unlock()
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		m.log.Warn("read model: cannot read changed rows; retrying", "error", err, "in", wait)
		m.fail(errStoreUnreadable)
		if !sleepCtx(ctx, wait) {
			return false
		}
	}
}

// refresh reads the rows c names and puts them in the copy.
func (m *readModel) refresh(ctx context.Context, c changes) error {
	ids := make([]int64, 0, len(c.resources))
	for id := range c.resources {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	fresh := make([]*modelResource, 0, len(ids))
	for chunk := range slices.Chunk(ids, modelPage) {
		rows, err := m.st.ListResources(ctx, store.ResourceFilter{IDs: chunk})
		if err != nil {
			return err
		}
		for _, r := range rows {
			fresh = append(fresh, newModelResource(r))
		}
	}
	var sources []*store.Source
	var types []*store.ResourceType
	var err error
	if c.sources {
		if sources, err = m.st.ListSources(ctx); err != nil {
			return err
		}
		// A source orphaned or served again changes how each of its
		// resources reads (orphaned), though their rows did not change:
		// they are read again, after the sources.
		m.mu.RLock()
		flipped := orphanFlips(m.sources, sources)
		m.mu.RUnlock()
		for _, name := range flipped {
			rows, err := m.st.ListResources(ctx, store.ResourceFilter{Source: name})
			if err != nil {
				return err
			}
			for _, r := range rows {
				fresh = append(fresh, newModelResource(r))
			}
		}
	}
	if c.types {
		if types, err = m.st.ListResourceTypes(ctx, store.TypeFilter{}); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	found := make(map[int64]bool, len(fresh))
	for _, r := range fresh {
		found[r.id] = true
		m.putLocked(r)
	}
	var gone map[int64]bool
	for _, id := range ids {
		if !found[id] {
			if gone == nil {
				gone = map[int64]bool{}
			}
			gone[id] = true
		}
	}
	m.removeLocked(gone)
	if c.sources {
		m.sources = sources
	}
	if c.types {
		m.types = types
	}
	return nil
}

// orphanFlips returns the names of the sources that are orphaned in one of
// was and now but not in the other.
func orphanFlips(was, now []*store.Source) []string {
	orphaned := func(ss []*store.Source) map[string]bool {
		out := map[string]bool{}
		for _, s := range ss {
			if s.Phase == store.SourceOrphaned {
				out[s.Name] = true
			}
		}
		return out
	}
	before, after := orphaned(was), orphaned(now)
	var out []string
	for name := range before {
		if !after[name] {
			out = append(out, name)
		}
	}
	for name := range after {
		if !before[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// putLocked puts r in the copy in place of the row with its ID.
func (m *readModel) putLocked(r *modelResource) {
	if old, ok := m.byID[r.id]; ok {
		m.unindexLocked(old)
	} else if n := len(m.ids); n == 0 || m.ids[n-1] < r.id {
		m.ids = append(m.ids, r.id)
	} else {
		i, _ := slices.BinarySearch(m.ids, r.id)
		m.ids = slices.Insert(m.ids, i, r.id)
	}
	m.byID[r.id] = r
	indexName(m.named, r)
	m.resourcesSeq++
}

// byRefLocked returns the resource ref names, or nil.
func (m *readModel) byRefLocked(ref manifest.ObjectRef) *modelResource {
	for _, id := range m.named[kindName{ref.Kind, ref.Name}] {
		if e := m.byID[id]; e != nil && e.namespace == ref.Namespace {
			return e
		}
	}
	return nil
}

// indexName adds r to the index by name.
func indexName(named map[kindName][]int64, r *modelResource) {
	kn := kindName{r.kind, r.name}
	ids := named[kn]
	if i, found := slices.BinarySearch(ids, r.id); !found {
		named[kn] = slices.Insert(ids, i, r.id)
	}
}

// unindexLocked drops old, which is leaving the copy or being replaced,
// from the index by name.
func (m *readModel) unindexLocked(old *modelResource) {
	kn := kindName{old.kind, old.name}
	ids := m.named[kn]
	if i, found := slices.BinarySearch(ids, old.id); found {
		if ids = slices.Delete(ids, i, i+1); len(ids) == 0 {
			delete(m.named, kn)
		} else {
			m.named[kn] = ids
		}
	}
}

// namedLocked returns the resources of kind with name, in every
// namespace, by namespace.
func (m *readModel) namedLocked(kind, name string) []*modelResource {
	ids := m.named[kindName{kind, name}]
	out := make([]*modelResource, 0, len(ids))
	for _, id := range ids {
		if e := m.byID[id]; e != nil {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *modelResource) int { return cmp.Compare(a.namespace, b.namespace) })
	return out
}

// repackLocked puts r, the same resource as old held another way, in
// old's place. The resources do not change, and
// pages prepared from them stay as they are.
func (m *readModel) repackLocked(old, r *modelResource) {
	m.byID[r.id] = r
}

// removeLocked drops the rows of gone from the copy.
func (m *readModel) removeLocked(gone map[int64]bool) {
	if len(gone) == 0 {
		return
	}
	for id := range gone {
		if old, ok := m.byID[id]; ok {
			m.unindexLocked(old)
			delete(m.byID, id)
		}
	}
	m.ids = slices.DeleteFunc(m.ids, func(id int64) bool { return gone[id] })
	m.resourcesSeq++
}

// rebuild reads the whole store into a new copy, retrying while the store
// cannot be read; reads wait for it, or are refused. It returns false
// when ctx is done.
func (m *readModel) rebuild(ctx context.Context) bool {
	m.setProblem("the read model is being built afresh")
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := m.build(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		m.log.Warn("read model: cannot read the store; retrying", "error", err, "in", wait)
		m.fail(errStoreUnreadable)
		if !sleepCtx(ctx, wait) {
			return false
		}
	}
}

// build reads every resource, source and type. The fence it issues first
// is a version the new copy covers: every write committed before the
// fence is read after it.
func (m *readModel) build(ctx context.Context) error {
	start := time.Now()
	v, err := m.st.Fence(ctx)
	if err != nil {
		return err
	}
	byID := map[int64]*modelResource{}
	named := map[kindName][]int64{}
	var ids []int64
	for after := int64(0); ; {
		rows, err := m.st.ListResources(ctx, store.ResourceFilter{After: after, Limit: modelPage})
		if err != nil {
			return err
		}
		for _, r := range rows {
			e := newModelResource(r)
			byID[e.id] = e
			indexName(named, e)
			ids = append(ids, e.id)
		}
		if len(rows) < modelPage {
			break
		}
		after = rows[len(rows)-1].ID
	}
	sources, err := m.st.ListSources(ctx)
	if err != nil {
		return err
	}
	types, err := m.st.ListResourceTypes(ctx, store.TypeFilter{})
	if err != nil {
		return err
	}
	agents, err := m.st.ListAgents(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byID, m.named, m.ids, m.sources, m.types = byID, named, ids, sources, types
	m.agents = agentsByID(agents)
	m.resourcesSeq++
	m.version = max(m.version, v)
	// Listening, and just read: current now. Fences issued before are
	// heard or lost with the old listener.
	m.heardAt, m.fences = time.Now(), nil
	m.ready, m.problem, m.failing = true, "", false
	m.broadcastLocked()
	m.log.Debug("read model built", "resources", len(ids), "version", v, "took", time.Since(start))
	return nil
}

// encodeBufs are scratch buffers for encoding a resource before it is
// copied, at its exact size, into the copy: encoding straight into a new
// slice would keep up to twice the bytes in capacity.
var encodeBufs = gosync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func newModelResource(r *store.Resource) *modelResource {
	bp := encodeBufs.Get().(*[]byte)
	b := appendResource((*bp)[:0], r)
	// Kinds, versions, sources, namespaces, actions and labels repeat
	// across thousands of resources: each is held once.
	e := &modelResource{id: r.ID, kind: unique.Make(r.Kind).Value(), namespace: unique.Make(r.Namespace).Value(), name: r.Name,
		version: unique.Make(r.Version).Value(), source: unique.Make(r.Source.Name).Value(),
		action: unique.Make(r.Action).Value(), phase: r.Phase, labels: labelPairs(r.Labels),
		json: bytes.Clone(b), madeAt: time.Now().UnixNano(),
		settling: r.LeaseOwner != "" || r.ObservedGeneration != r.Generation || r.DeletionRequestedAt != nil ||
			r.ReconcileRequestedAt != nil}
	if why.Explained(r) {
		e.facts = why.FromStore(r)
		e.facts.Ref, e.facts.Source = e.ref(), e.source
	}
	if cap(b) <= maxPooledBuf {
		*bp = b
		encodeBufs.Put(bp)
	}
	return e
}

// setProblem makes reads wait, up to their bound, for the copy: it is
// being built.
func (m *readModel) setProblem(why string) { m.setState(why, false) }

// errStoreUnreadable is why reads are refused while the store cannot be
// read. The store's own error may name its host, user or socket: it is
// logged, never sent.
const errStoreUnreadable = "the store cannot be read; retry later"

// fail refuses reads at once: the store cannot be read, or what it
// announces cannot be heard.
func (m *readModel) fail(why string) { m.setState(why, true) }

func (m *readModel) setState(why string, failing bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready || m.problem != why || m.failing != failing {
		m.ready, m.problem, m.failing = false, why, failing
		m.broadcastLocked()
	}
}

func (m *readModel) broadcastLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// await waits until the copy is ready and has heard version min (zero:
// any), up to the model's bound, and returns with the read lock held; the
// caller must RUnlock. It fails with a 503 when the copy is not ready in
// time, and with ctx's error when the request ends first.
func (m *readModel) await(ctx context.Context, minVersion int64) error {
	var deadline <-chan time.Time
	for {
		m.mu.RLock()
		if m.ready && m.version >= minVersion {
			return nil
		}
		changed, ready, problem, failing, have := m.changed, m.ready, m.problem, m.failing, m.version
		m.mu.RUnlock()
		if failing {
			return errModelNotReady{why: problem}
		}
		if ready {
			// The version is on its way: the runner need not gather more.
			select {
			case m.hurry <- struct{}{}:
			default:
			}
		}
		if deadline == nil {
			// Waiting costs a goroutine and a timer each: past a bound,
			// reads are told at once rather than pile up.
			if m.waiting.Add(1) > maxWaitingReads {
				m.waiting.Add(-1)
				return errModelNotReady{why: fmt.Sprintf("more than %d reads wait for the read model", maxWaitingReads)}
			}
			defer m.waiting.Add(-1)
			t := time.NewTimer(m.wait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			if !ready {
				return errModelNotReady{why: problem}
			}
			return errModelNotReady{why: fmt.Sprintf("the read model has store version %d, not yet %d, after %s", have, minVersion, m.wait)}
		}
	}
}

// minVersion is the store version a read asks for: its No8s-Min-Version
// header or minVersion parameter; zero when none.
func minVersion(r *http.Request) (int64, error) {
	raw := r.Header.Get(HeaderMinVersion)
	if q := r.URL.Query(); q.Has(minVersionParam) {
		if raw != "" && raw != q.Get(minVersionParam) {
			return 0, errorf(http.StatusBadRequest, "%s and %s: give one, or the same", HeaderMinVersion, minVersionParam)
		}
		raw = q.Get(minVersionParam)
	}
	if raw == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || v < 0 {
		return 0, errorf(http.StatusBadRequest, "%s: %q is not a store version (a whole number from the answer to a write)", minVersionParam, raw)
	}
	return v, nil
}

// view runs fn on the copy under its read lock, once the copy is ready
// and has the version r asks for.
func (s *Server) view(r *http.Request, fn func(m *readModel) error) error {
	return s.viewAt(r, 1, fn)
}

// viewAt is view for a read of the given cost, paced by it while the
// agent's own work is in flight (see priority.Pacer); a cost of zero is
// not paced.
func (s *Server) viewAt(r *http.Request, cost float64, fn func(m *readModel) error) error {
	if cost > 0 {
		if err := s.pacer.Wait(r.Context(), cost); err != nil {
			return err
		}
	}
	v, err := minVersion(r)
	if err != nil {
		return err
	}
	// Whoever reads from this agent sees what was written through it,
	// version or not, as when reads went to the database: a client of the
	// predecessor's API creates, then reads.
	v = max(v, s.lastWrite.Load())
	m := s.model
	if err := m.await(r.Context(), v); err != nil {
		var nr errModelNotReady
		if errors.As(err, &nr) {
			return &Error{Status: http.StatusServiceUnavailable, Message: nr.why}
		}
		return err
	}
	defer m.mu.RUnlock()
	return fn(m)
}

// matches reports whether e passes f (but for its cursor and limit).
func (e *modelResource) matches(f *store.ResourceFilter) bool {
	if (f.Kind != "" && e.kind != f.Kind) || (f.Phase != "" && e.phase != f.Phase) ||
		(f.Actions == nil && f.Action != "" && e.action != f.Action) || (f.Actions != nil && !slices.Contains(f.Actions, e.action)) ||
		(f.Source != "" && e.source != f.Source) ||
		(f.Name != "" && e.name != f.Name) || (f.Namespaces != nil && !slices.Contains(f.Namespaces, e.namespace)) {
		return false
	}
	for k, v := range f.Labels {
		if got, ok := e.label(k); !ok || got != v {
			return false
		}
	}
	return true
}

// label returns the value of the label k, if the resource has it.
func (e *modelResource) label(k string) (string, bool) {
	for i := 0; i+1 < len(e.labels); i += 2 {
		if e.labels[i] == k {
			return e.labels[i+1], true
		}
	}
	return "", false
}

// labelPairs returns labels as key, value pairs, each string held once
// across the copy.
func labelPairs(labels map[string]string) []string {
	if len(labels) == 0 {
		return nil
	}
	out := make([]string, 0, 2*len(labels))
	for k, v := range labels {
		out = append(out, unique.Make(k).Value(), unique.Make(v).Value())
	}
	return out
}

// listLocked returns the resources f selects, in ID order.
func (m *readModel) listLocked(f *store.ResourceFilter) []*modelResource {
	// Past After, found without adding to it: After may be the largest
	// ID there can be.
	i, found := slices.BinarySearch(m.ids, f.After)
	if found {
		i++
	}
	var out []*modelResource
	for ; i < len(m.ids) && (f.Limit == 0 || len(out) < f.Limit); i++ {
		e := m.byID[m.ids[i]]
		if e.matches(f) {
			out = append(out, e)
		}
	}
	return out
}

// sourcesLocked returns the sources by name.
func (m *readModel) sourceLocked(name string) (*store.Source, bool) {
	i, ok := slices.BinarySearchFunc(m.sources, name, func(s *store.Source, name string) int { return cmp.Compare(s.Name, name) })
	if !ok {
		return nil, false
	}
	return m.sources[i], true
}

// typesLocked returns the types f selects, by name then version.
func (m *readModel) typesLocked(f store.TypeFilter) []*store.ResourceType {
	var out []*store.ResourceType
	for _, t := range m.types {
		if (f.Name == "" || t.Name == f.Name) && (f.Source == "" || t.Source.Name == f.Source) {
			out = append(out, t)
		}
	}
	return out
}

// versioned answers a write that succeeds with the store version of a
// fence issued after it, No8s-Store-Version: a read that asks for that
// version, from this agent or another on the store, sees the write.
func (s *Server) versioned(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&versionWriter{ResponseWriter: w, r: r, s: s}, r)
	})
}

// versionWriter adds the header as the answer's status goes out, once
// the handler's writes are committed.
type versionWriter struct {
	http.ResponseWriter
	r       *http.Request
	s       *Server
	written bool
}

func (w *versionWriter) WriteHeader(code int) {
	if !w.written {
		w.written = true
		if code < http.StatusBadRequest {
			if v, err := w.s.store.Fence(w.r.Context()); err == nil {
				w.Header().Set(HeaderStoreVersion, strconv.FormatInt(v, 10))
				for cur := w.s.lastWrite.Load(); v > cur && !w.s.lastWrite.CompareAndSwap(cur, v); cur = w.s.lastWrite.Load() {
				}
			} else {
				// The write stands; only its version is missing, which a
				// client sees by the header's absence.
				w.s.log.Warn("no store version for a write", "error", err)
			}
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *versionWriter) Write(p []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *versionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// pageBufs recycle the buffers pages are prepared in; a page of a thousand
// large resources is left to the collector.
var pageBufs = gosync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// maxPooledPage is the largest page buffer kept for reuse.
const maxPooledPage = 4 << 20

// pageCost is what a page of f's limit costs to pace, against a read of
// one resource: preparing and sending a page of 500 costs about 50 times
// as much.
func pageCost(f *store.ResourceFilter) float64 { return 1 + float64(f.Limit)/10 }

// listPage returns the page of resources f selects: kept from an earlier
// request while the resources have not changed since, or prepared now.
// A page is prepared (packed resources unpacked, joined) by one reader
// per two cores at a time, and others wait their turn rather than be
// refused: readers that never back off would otherwise fill the
// scheduler's queues with work, and every step of the reconciler, a
// goroutine woken by its database's answer, would wait behind all of it.
// Readers that waited for the same page take the one prepared meanwhile:
// it holds the resources as they were when they came in, or newer. The
// page goes out after the turn ends, so that a client that reads slowly
// holds no turn.
func (s *Server) listPage(r *http.Request, f *store.ResourceFilter) (*cachedPage, error) {
	key := pageKey(f)
	var (
		rows    []*modelResource
		seq     uint64
		page    *cachedPage
		arrived uint64
	)
	err := s.viewAt(r, pageCost(f), func(m *readModel) error {
		arrived = m.resourcesSeq
		page = s.pages.get(key, arrived)
		return nil
	})
	if err != nil || page != nil {
		return page, err
	}
	select {
	case s.pageTurns <- struct{}{}:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	defer func() { <-s.pageTurns }()
	err = s.viewAt(r, 0, func(m *readModel) error {
		seq = m.resourcesSeq
		if page = s.pages.get(key, arrived); page == nil {
			rows = m.listLocked(f)
		}
		return nil
	})
	if err != nil || page != nil {
		return page, err
	}
	bp := pageBufs.Get().(*[]byte)
	b, err := appendPage((*bp)[:0], rows)
	page = &cachedPage{key: key, seq: seq, rows: len(rows)}
	if err == nil {
		page.body = bytes.Clone(b)
	}
	if cap(b) <= maxPooledPage {
		*bp = b[:0]
		pageBufs.Put(bp)
	}
	if err != nil {
		return nil, err
	}
	if len(rows) > 0 {
		page.last = rows[len(rows)-1].id
	}
	s.pages.put(page)
	return page, nil
}
