package sqlite

import (
	"context"
	"sync"

	"github.com/no8s/no8s-agent/store"
)

// maxBacklog is how many notifications a listener may fall behind. Past
// that its backlog is dropped for one Resync: a slow listener must not
// hold up writers, nor grow without bound, and a Resync tells it to look
// at the state afresh, which is what the dropped ones would have led to.
// It is large because one transaction may make many at once: the first
// sync of 10,000 resources sends a status event for each (some 250 bytes).
const maxBacklog = 1 << 16

// hub delivers notifications to the listeners of one Open.
type hub struct {
	// order is held from a commit to the publication of its
	// notifications, so that listeners hear transactions in commit order.
	order sync.Mutex

	// mu guards what follows and every listener's backlog.
	mu        sync.Mutex
	listeners map[*listener]struct{}
	closed    bool
}

// listener is one Listen call.
type listener struct {
	topics  map[string]bool
	backlog []store.Notification
	// wake has room for one signal: there is something in the backlog.
	wake chan struct{}
	// done is closed when the store closes.
	done chan struct{}
}

func newHub() *hub { return &hub{listeners: map[*listener]struct{}{}} }

// publish queues notes for the listeners of their topics. It never blocks
// on a listener.
func (h *hub) publish(notes []store.Notification) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.listeners {
		added := false
		for _, n := range notes {
			if !l.topics[n.Topic] {
				continue
			}
			if len(l.backlog) >= maxBacklog {
				l.backlog = []store.Notification{{Resync: true}}
			}
			l.backlog = append(l.backlog, n)
			added = true
		}
		if added {
			select {
			case l.wake <- struct{}{}:
			default:
			}
		}
	}
}

// next takes the oldest notification of l's backlog.
func (h *hub) next(l *listener) (store.Notification, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(l.backlog) == 0 {
		return store.Notification{}, false
	}
	n := l.backlog[0]
	l.backlog[0] = store.Notification{}
	l.backlog = l.backlog[1:]
	if len(l.backlog) == 0 {
		l.backlog = nil
	}
	return n, true
}

// close ends every listener.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for l := range h.listeners {
		close(l.done)
		delete(h.listeners, l)
	}
}

// Listen subscribes to topics and delivers, in order, the notifications of
// this process's Store (the one Open returned and its transactions): those
// of a transaction once it committed. The channel is closed when ctx is
// done or the Store is closed. Other processes that open the file are not
// heard: an agent owns its file.
func (s *Store) Listen(ctx context.Context, topics ...string) (<-chan store.Notification, error) {
	if s.tx != nil {
		return nil, invalid("listen inside a transaction")
	}
	if len(topics) == 0 {
		return nil, invalid("listen: no topics")
	}
	l := &listener{topics: map[string]bool{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	for _, t := range topics {
		l.topics[t] = true
	}
	h := s.hub
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, invalid("listen: the store is closed")
	}
	h.listeners[l] = struct{}{}
	h.mu.Unlock()

	ch := make(chan store.Notification)
	go func() {
		defer close(ch)
		defer func() {
			h.mu.Lock()
			delete(h.listeners, l)
			h.mu.Unlock()
		}()
		for {
			n, ok := h.next(l)
			if !ok {
				select {
				case <-l.wake:
					continue
				case <-ctx.Done():
					return
				case <-l.done:
					return
				}
			}
			select {
			case ch <- n:
			case <-ctx.Done():
				return
			case <-l.done:
				return
			}
		}
	}()
	return ch, nil
}

// NotificationsInProcess is true: listeners hear this process's commits
// from memory; see store.LocalNotifications.
func (s *Store) NotificationsInProcess() bool { return true }
