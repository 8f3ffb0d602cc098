package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	gosync "sync"
	"sync/atomic"
	"time"

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

// subscriberBuffer is how many events a client may fall behind before it
// is told to resync instead.
const subscriberBuffer = 256

// event is one server-sent event, with what filters match on.
type event struct {
	name         string
	kind, source string
	data         []byte
}

// subscriber is one client of the event stream.
type subscriber struct {
	kind, source string
	ch           chan event
	// lost is set when an event was dropped because ch was full.
	lost atomic.Bool
}

func (sub *subscriber) wants(ev event) bool {
	if ev.name == EventResync {
		return true
	}
	if sub.kind != "" && (ev.name != EventResource || ev.kind != sub.kind) {
		return false
	}
	return sub.source == "" || ev.source == sub.source
}

// hub turns the store's notifications into events for every subscriber.
type hub struct {
	store store.Store
	log   *slog.Logger

	mu   gosync.Mutex
	subs map[*subscriber]struct{}
	// stopped is set when run returns; the channels of all subscribers are
	// closed then, which ends their streams.
	stopped bool
	// ready is closed once the hub listens, so that streams opened before
	// then do not promise events they would miss.
	ready     chan struct{}
	readyOnce gosync.Once
}

func newHub(st store.Store, log *slog.Logger) *hub {
	return &hub{store: st, log: log, subs: map[*subscriber]struct{}{}, ready: make(chan struct{})}
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
	h.stopped = true
	for sub := range h.subs {
		close(sub.ch)
		delete(h.subs, sub)
	}
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
		data, err := json.Marshal(st)
		if err != nil {
			return event{}, false
		}
		return event{name: EventResource, kind: st.Kind, source: st.Source, data: data}, true
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

func (h *hub) publish(ev event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		if !sub.wants(ev) {
			continue
		}
		select {
		case sub.ch <- ev:
		default:
			sub.lost.Store(true)
		}
	}
}

// subscribe adds a stream; nil when the hub has stopped.
func (h *hub) subscribe(kind, source string) *subscriber {
	sub := &subscriber{kind: kind, source: source, ch: make(chan event, subscriberBuffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil
	}
	h.subs[sub] = struct{}{}
	return sub
}

func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	delete(h.subs, sub)
	h.mu.Unlock()
}

// serveEvents streams events as text/event-stream until the client goes
// away or the server stops. ?kind= and ?source= filter them.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
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
	q := r.URL.Query()
	sub := s.events.subscribe(q.Get("kind"), q.Get("source"))
	if sub == nil {
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, "the event stream has stopped"), nil)
		return
	}
	defer s.events.unsubscribe(sub)

	// The stream lives as long as the request; a write deadline would cut it.
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
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case ev, open := <-sub.ch:
			if !open {
				return // the server is stopping
			}
			_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, ev.data)
			if err == nil && sub.lost.Swap(false) {
				_, err = fmt.Fprintf(w, "event: %s\ndata: {}\n\n", EventResync)
			}
		case <-heartbeat.C:
			_, err = fmt.Fprint(w, ": heartbeat\n\n")
		}
		if err != nil {
			return
		}
		flusher.Flush()
	}
}
