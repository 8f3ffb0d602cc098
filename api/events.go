package api

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	gosync "sync"
	"time"
	"unicode/utf8"
	"unique"

	"github.com/no8s/no8s-agent/store"
)

// Event types of GET /api/v1/events.
const (
	// EventResource carries a store.StatusEvent: a resource was created,
	// removed, or its status changed.
	EventResource = "resource"
	// EventSource carries a Source: a source's state changed.
	EventSource = "source"
	// EventResync says that events may have been lost (the agent's database
	// connection dropped, or the client fell behind): read the state afresh.
	EventResync = "resync"
)

// eventRing is how many recent events the hub keeps for its streams. A
// stream further behind than that is sent a resync and skips ahead to the
// newest event: a client that reads too slowly, or any stream when a sync
// of thousands of resources floods it within one flush interval. Measured
// with 500 streams on two cores, sending each of them the 10,000 events of
// such a sync (a gigabyte in all) held the reconciler up for a quarter of
// a minute; a resync costs a few bytes, and the client reads the state
// afresh instead.
const eventRing = 4096

// eventFlushInterval is how often, at most, a busy stream writes: the
// events of a burst go out together in one write and one flush instead of
// one each, so that hundreds of streams cost a few system calls per
// interval rather than hundreds per event. An idle stream sends the first
// event of a burst at once. Measured with 500 streams on two cores during
// a 10,000-resource sync, writes every 250 ms made the sync take about
// three times as long as without streams; every second, under twice.
const eventFlushInterval = time.Second

// eventWriteTimeout is how long a stream's client may take to accept a
// write before its stream is closed: a client that stopped reading holds
// no goroutine and no connection for longer.
const eventWriteTimeout = 10 * time.Second

// resyncFrame is the encoded resync event.
var resyncFrame = []byte("event: " + EventResync + "\ndata: {}\n\n")

// event is one server-sent event, with what filters match on.
type event struct {
	name         string
	kind, source string
	// namespace is the resource's, for a resource event.
	namespace string
	// id is the resource's, for a resource event.
	id   int64
	data []byte
	// frame is the event as sent, encoded once by publish and shared by
	// every stream.
	frame []byte
}

// subscriber is one client of the event stream.
type subscriber struct {
	kind, source string
	// namespaces, when not nil, are the only namespaces whose resources'
	// events are wanted: those the stream asks for, or those its token
	// holds. Such a stream is sent no source's events, which are about
	// every namespace.
	namespaces []string
	// id, when not zero, is the one resource whose events are wanted.
	id int64
	// cursor is the sequence number of the next event to send; only the
	// stream's own goroutine uses it, under the hub's read lock.
	cursor uint64
}

func (sub *subscriber) wants(ev event) bool {
	if ev.name == EventResync {
		return true
	}
	if sub.kind != "" && (ev.name != EventResource || ev.kind != sub.kind) {
		return false
	}
	if sub.id != 0 && (ev.name != EventResource || ev.id != sub.id) {
		return false
	}
	if sub.namespaces != nil && (ev.name != EventResource || !slices.Contains(sub.namespaces, ev.namespace)) {
		return false
	}
	return sub.source == "" || ev.source == sub.source
}

// hub turns the store's notifications into events for every subscriber.
// Publishing costs the same whatever the number of streams and never
// waits for one: an event is encoded once into a ring that every stream
// reads at its own pace.
type hub struct {
	store store.Store
	log   *slog.Logger
	// mask hides secret values in an event's JSON; nil when there are none.
	mask func(json.RawMessage) json.RawMessage
	// maskCutTail hides the start of a secret at the end of a message the
	// store cut; nil when there are no secrets.
	maskCutTail func(string) string

	mu gosync.RWMutex
	// ring holds the last eventRing events; event n is at n % eventRing.
	ring []event
	// next is the sequence number of the next event published.
	next uint64
	// changed is closed (and replaced) when an event is published or the
	// hub stops, waking the streams that wait for one.
	changed chan struct{}
	subs    map[*subscriber]struct{}
	// stopped is set when run returns; every stream ends then.
	stopped bool
	// ready is closed once the hub listens, so that streams opened before
	// then do not promise events they would miss.
	ready     chan struct{}
	readyOnce gosync.Once
}

// EventsPath is the path of the event stream of every change.
const EventsPath = "/api/v1/events"

// eventsPath is the event stream's route.
const eventsPath = EventsPath

// newHub returns a hub fed by st's notifications; mask, when not nil, is
// applied to each event's JSON once, as it is encoded.
func newHub(st store.Store, log *slog.Logger, mask func(json.RawMessage) json.RawMessage) *hub {
	return &hub{store: st, log: log, mask: mask, ring: make([]event, eventRing), changed: make(chan struct{}),
		subs: map[*subscriber]struct{}{}, ready: make(chan struct{})}
}

// run listens until ctx is done. A first subscription that fails (the
// database is down, or out of connections) is retried with backoff: the
// store's listener reconnects by itself once it has started.
func (h *hub) run(ctx context.Context) error {
	defer h.stop()
	var notes <-chan store.Notification
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 30*time.Second) {
		var err error
		if notes, err = h.store.Listen(ctx, store.TopicStatus, store.TopicSources); err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		h.log.Warn("event stream cannot listen to the store; retrying", "error", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
	h.readyOnce.Do(func() { close(h.ready) })
	for n := range notes {
		ev, ok := h.translate(ctx, n)
		if ok {
			h.publish(ev)
		}
	}
	return nil
}

// stop closes every stream and refuses new ones.
func (h *hub) stop() {
	h.readyOnce.Do(func() { close(h.ready) })
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	h.stopped = true
	close(h.changed)
}

// translate turns a notification into an event.
func (h *hub) translate(ctx context.Context, n store.Notification) (event, bool) {
	switch {
	case n.Resync:
		return event{name: EventResync, data: []byte(`{}`)}, true
	case n.Topic == store.TopicStatus:
		st, err := store.ParseStatusEvent(n.Payload)
		if err != nil {
			h.log.Warn("unreadable status notification", "error", err)
			return event{}, false
		}
		if h.maskCutTail != nil && utf8.RuneCountInString(st.Message) >= store.MaxStatusMessage {
			st.Message = h.maskCutTail(st.Message)
		}
		data := st.AppendJSON(nil)
		// The event's strings are the notification's: the ring keeps one
		// copy of each kind, namespace and source rather than every
		// notification it read them from.
		return event{name: EventResource, kind: unique.Make(st.Kind).Value(), namespace: unique.Make(st.Namespace).Value(),
			source: unique.Make(st.Source).Value(), id: st.ID, data: data}, true
	case n.Topic == store.TopicSources:
		src, err := h.store.GetSource(ctx, n.Payload)
		if err != nil {
			// Not recorded yet, or gone: nothing to show.
			return event{}, false
		}
		data, err := json.Marshal(NewSource(src))
		if err != nil {
			return event{}, false
		}
		return event{name: EventSource, source: src.Name, data: data}, true
	}
	return event{}, false
}

// publish adds ev to the ring, encoding it once for every stream, and
// wakes the streams. It never waits for a stream.
func (h *hub) publish(ev event) {
	if h.mask != nil {
		ev.data = h.mask(ev.data)
	}
	ev.frame = make([]byte, 0, len("event: \ndata: \n\n")+len(ev.name)+len(ev.data))
	ev.frame = append(append(append(ev.frame, "event: "...), ev.name...), "\ndata: "...)
	// The ring keeps thousands of events: data is the frame's own copy,
	// not a second one.
	at := len(ev.frame)
	ev.frame = append(append(ev.frame, ev.data...), "\n\n"...)
	ev.data = ev.frame[at : at+len(ev.data) : at+len(ev.data)]
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	h.ring[h.next%eventRing] = ev
	h.next++
	close(h.changed)
	h.changed = make(chan struct{})
}

// read appends to frames the encoded events sub has not been sent yet and
// wants, and advances its cursor. lost reports that sub fell more than the
// ring behind: it skipped ahead to the newest event and must be sent a
// resync first. changed is closed when there is more to read; ok is false
// once the hub has stopped.
func (h *hub) read(sub *subscriber, frames [][]byte) (_ [][]byte, lost bool, changed <-chan struct{}, ok bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.stopped {
		return frames, false, nil, false
	}
	if h.next-sub.cursor > eventRing {
		sub.cursor, lost = h.next, true
	}
	for ; sub.cursor < h.next; sub.cursor++ {
		if ev := h.ring[sub.cursor%eventRing]; sub.wants(ev) {
			frames = append(frames, ev.frame)
		}
	}
	return frames, lost, h.changed, true
}

// subscribe adds a stream that is sent every event published from now on;
// nil when the hub has stopped.
func (h *hub) subscribe(f store.ResourceFilter, id int64) *subscriber {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil
	}
	sub := &subscriber{kind: f.Kind, source: f.Source, namespaces: f.Namespaces, id: id, cursor: h.next}
	h.subs[sub] = struct{}{}
	return sub
}

func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	delete(h.subs, sub)
	h.mu.Unlock()
}

// serveResourceEvents streams the events of one resource, as the
// predecessor's per-resource stream: GET /api/v1/resources/{id}/events.
func (s *Server) serveResourceEvents(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err == nil {
		_, err = s.store.GetResource(r.Context(), id)
	}
	if err == nil {
		err = s.mayResource(r, VerbGet, id)
	}
	if err != nil {
		s.writeError(w, r, err, nil)
		return
	}
	s.streamEvents(w, r, store.ResourceFilter{}, id)
}

// serveEvents streams events as text/event-stream until the client goes
// away or the server stops. ?kind=, ?namespace= and ?source= filter them;
// a token whose grants are limited to namespaces is sent the events of
// those only.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// resource_type is the predecessor's name for the filter.
	f := store.ResourceFilter{Kind: cmp.Or(q.Get("kind"), q.Get("resource_type")), Source: q.Get("source")}
	ns, err := namespaceParam(q)
	if err == nil && ns != "" {
		f.Namespaces = []string{ns}
	}
	if err == nil {
		err = narrowNamespaces(r.Context(), VerbList, &f, ns)
	}
	if err != nil {
		s.writeError(w, r, err, nil)
		return
	}
	s.streamEvents(w, r, f, 0)
}

// streamEvents streams the events the filter (its kind, source and
// namespaces) lets through, or those of resource id when not zero.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, f store.ResourceFilter, id int64) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.writeError(w, r, errorf(http.StatusInternalServerError, "streaming is not supported"), nil)
		return
	}
	select {
	case <-s.events.ready:
	case <-r.Context().Done():
		return
	case <-time.After(10 * time.Second):
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, "the event stream is not running yet; retry"), nil)
		return
	}
	sub := s.events.subscribe(f, id)
	if sub == nil {
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, "the event stream has stopped"), nil)
		return
	}
	defer s.events.unsubscribe(sub)

	// The stream lives as long as the request: the server's write deadline
	// would cut it, so each write sets its own instead (writeFrames).
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// The first comment tells the client it is subscribed: every change
	// committed from now on will be sent.
	if _, err := fmt.Fprint(w, "retry: 3000\n: subscribed\n\n"); err != nil {
		return
	}
	flusher.Flush()

	heartbeat := time.NewTicker(s.opts.Heartbeat)
	defer heartbeat.Stop()
	pace := time.NewTimer(eventFlushInterval)
	defer pace.Stop()
	var frames [][]byte
	for {
		var (
			lost, ok bool
			changed  <-chan struct{}
		)
		frames, lost, changed, ok = s.events.read(sub, frames[:0])
		if !ok {
			return // the server is stopping
		}
		if lost || len(frames) > 0 {
			err := writeFrames(w, rc, lost, frames)
			clear(frames) // let the ring's old frames go
			if err != nil {
				return
			}
			heartbeat.Reset(s.opts.Heartbeat)
			// What comes next waits out the interval, so that a burst goes
			// out in one write per interval, not one per event.
			pace.Reset(eventFlushInterval)
			select {
			case <-r.Context().Done():
				return
			case <-pace.C:
			}
			continue
		}
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		case <-heartbeat.C:
			if err := writeFrames(w, rc, false, [][]byte{heartbeatFrame}); err != nil {
				return
			}
		}
	}
}

var heartbeatFrame = []byte(": heartbeat\n\n")

// writeFrames writes a batch of encoded events, after a resync when lost,
// and flushes them once. A client that does not take them within
// eventWriteTimeout fails the write, which ends its stream.
func writeFrames(w http.ResponseWriter, rc *http.ResponseController, lost bool, frames [][]byte) error {
	_ = rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
	if lost {
		if _, err := w.Write(resyncFrame); err != nil {
			return err
		}
	}
	for _, f := range frames {
		if _, err := w.Write(f); err != nil {
			return err
		}
	}
	return rc.Flush()
}
