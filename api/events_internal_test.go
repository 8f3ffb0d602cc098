package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

// hubServer serves a Server whose hub is fed by the test through publish,
// without a store.
func hubServer(t *testing.T) (*Server, string) {
	t.Helper()
	s := New(Options{Heartbeat: time.Hour})
	s.events.readyOnce.Do(func() { close(s.events.ready) })
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	t.Cleanup(s.events.stop)
	return s, hs.URL
}

// subscribers counts the hub's open streams.
func subscribers(h *hub) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// readEvents follows the stream at url and sends the data of each event
// on the returned channel, and "resync" for a resync.
func readEvents(t *testing.T, url string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/api/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 1024)
	subscribed := make(chan struct{})
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		name := ""
		for sc.Scan() {
			switch l := sc.Text(); {
			case l == ": subscribed":
				close(subscribed)
			case strings.HasPrefix(l, "event: "):
				name = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "data: "):
				data := strings.TrimPrefix(l, "data: ")
				if name == EventResync {
					data = EventResync
				}
				select {
				case ch <- data:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	select {
	case <-subscribed:
	case <-time.After(10 * time.Second):
		t.Fatal("not subscribed within 10s")
	}
	return ch
}

// stalledStream subscribes over a connection with a small receive buffer
// and then reads nothing, like a client that hangs.
func stalledStream(t *testing.T, url string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "GET /api/v1/events HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []byte
	buf := make([]byte, 512)
	for !bytes.Contains(got, []byte(": subscribed")) {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("stalled stream: not subscribed: %v (%q)", err, got)
		}
		got = append(got, buf[:n]...)
	}
	return conn
}

// TestEventsStalledSubscriber checks that a subscriber that stops reading
// neither holds up publishing nor the other subscribers, which receive
// every event in order, and that it is dropped rather than kept forever
// with a goroutine blocked on its connection.
func TestEventsStalledSubscriber(t *testing.T) {
	t.Parallel()
	s, url := hubServer(t)
	readers := []<-chan string{readEvents(t, url), readEvents(t, url)}
	stalled := stalledStream(t, url)
	if n := subscribers(s.events); n != 3 {
		t.Fatalf("%d subscribers, want 3", n)
	}

	// Large events fill the stalled connection's buffers within a few
	// hundred; chunks smaller than any stream's buffer let the readers keep up.
	const events, chunk = 400, 100
	pad := strings.Repeat("x", 32<<10)
	for from := 0; from < events; from += chunk {
		published := make(chan struct{})
		go func() {
			defer close(published)
			for n := from; n < from+chunk; n++ {
				s.events.publish(event{name: EventResource, data: fmt.Appendf(nil, `{"n":%d,"pad":%q}`, n, pad)})
			}
		}()
		select {
		case <-published:
		case <-time.After(10 * time.Second):
			t.Fatalf("publishing events %d to %d took over 10s: the hub waits for a subscriber", from, from+chunk-1)
		}
		for i, r := range readers {
			for n := from; n < from+chunk; n++ {
				select {
				case data, ok := <-r:
					if want := fmt.Sprintf(`{"n":%d,`, n); !ok || !strings.HasPrefix(data, want) {
						t.Fatalf("reader %d: got %.40q (open %v), want event %d", i, data, ok, n)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("reader %d: no event %d within 10s", i, n)
				}
			}
		}
	}

	// The stalled stream is dropped once a write to it times out.
	deadline := time.After(30 * time.Second)
	for subscribers(s.events) != 2 {
		select {
		case <-deadline:
			t.Fatalf("the stalled subscriber is still subscribed 30s after its connection filled (%d subscribers)", subscribers(s.events))
		case <-time.After(20 * time.Millisecond):
		}
	}
	// What it was sent before that ends: the connection is closed, and it
	// never got all the events.
	_ = stalled.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(stalled)
	if err != nil {
		t.Fatalf("the stalled stream did not end: %v after %d bytes", err, len(got))
	}
	if bytes.Contains(got, fmt.Appendf(nil, `{"n":%d,`, events-1)) {
		t.Error("the stalled stream got every event")
	}
}

// TestEventsSlowSubscriberResyncs checks that a subscriber that falls
// further behind than the hub keeps is sent a resync and skips ahead to
// the newest events, while publishing goes on unhindered.
func TestEventsSlowSubscriberResyncs(t *testing.T) {
	t.Parallel()
	s, url := hubServer(t)
	slow := stalledStream(t, url)
	// Fill the slow stream's connection, then publish more small events
	// than the hub keeps for it, while it reads nothing.
	pad := strings.Repeat("x", 32<<10)
	const big, small = 300, eventRing + 500
	published := make(chan struct{})
	go func() {
		defer close(published)
		for n := range big + small {
			data := fmt.Appendf(nil, `{"n":%d}`, n)
			if n < big {
				data = fmt.Appendf(nil, `{"n":%d,"pad":%q}`, n, pad)
			}
			s.events.publish(event{name: EventResource, data: data})
		}
	}()
	select {
	case <-published:
	case <-time.After(10 * time.Second):
		t.Fatal("publishing took over 10s: the hub waits for a subscriber")
	}
	// Once it reads again it gets a resync, and then the next event.
	r := bufio.NewReader(slow)
	_ = slow.SetReadDeadline(time.Now().Add(20 * time.Second))
	resynced, last := false, -1
	for last < big+small {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("slow stream: %v (resynced %v, last event %d)", err, resynced, last)
		}
		switch {
		case strings.HasPrefix(line, "event: "+EventResync):
			resynced = true
			s.events.publish(event{name: EventResource, data: fmt.Appendf(nil, `{"n":%d}`, big+small)})
		case strings.HasPrefix(line, `data: {"n":`):
			var n int
			if _, err := fmt.Sscanf(line, `data: {"n":%d`, &n); err != nil {
				t.Fatal(err)
			}
			if resynced && n < big {
				t.Fatalf("event %d after the resync: it did not skip ahead", n)
			}
			last = n
		}
	}
	if !resynced {
		t.Error("the slow stream got no resync")
	}
}

// TestEventsEncodedOnce checks that streams share one encoding of each
// event instead of encoding it each.
func TestEventsEncodedOnce(t *testing.T) {
	t.Parallel()
	h := newHub(nil, nil, nil)
	a, b := h.subscribe(store.ResourceFilter{}, 0), h.subscribe(store.ResourceFilter{Kind: "Network"}, 0)
	h.publish(event{name: EventResource, kind: "Network", data: []byte(`{"id":1}`)})
	fa, _, _, _ := h.read(a, nil)
	fb, _, _, _ := h.read(b, nil)
	if len(fa) != 1 || len(fb) != 1 {
		t.Fatalf("frames %q and %q, want one each", fa, fb)
	}
	if string(fa[0]) != "event: resource\ndata: {\"id\":1}\n\n" {
		t.Errorf("frame %q", fa[0])
	}
	if &fa[0][0] != &fb[0][0] {
		t.Error("each stream has its own encoding of the event")
	}
}

// TestEventsMaskedOnce checks that, with secrets to hide, each event is
// masked once as it is encoded, whatever the number of streams, and that
// the event stream does not go through the per-response Wrap, which would
// mask every event again for each stream.
func TestEventsMaskedOnce(t *testing.T) {
	t.Parallel()
	var masks, wraps atomic.Int64
	s := New(Options{
		Heartbeat: time.Hour,
		Wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				wraps.Add(1)
				h.ServeHTTP(w, r)
			})
		},
		MaskEvent: func(raw json.RawMessage) json.RawMessage {
			masks.Add(1)
			return bytes.ReplaceAll(raw, []byte("hunter2-token"), []byte("***"))
		},
	})
	s.events.readyOnce.Do(func() { close(s.events.ready) })
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	t.Cleanup(s.events.stop)

	streams := []<-chan string{readEvents(t, hs.URL), readEvents(t, hs.URL), readEvents(t, hs.URL)}
	s.events.publish(event{name: EventResource, data: []byte(`{"status_message":"echoed hunter2-token"}`)})
	for i, ch := range streams {
		select {
		case got := <-ch:
			if got != `{"status_message":"echoed ***"}` {
				t.Errorf("stream %d got %s", i, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("stream %d: no event within 10s", i)
		}
	}
	if n := masks.Load(); n != 1 {
		t.Errorf("the event was masked %d times for %d streams, want once", n, len(streams))
	}
	if n := wraps.Load(); n != 0 {
		t.Errorf("the event stream went through Wrap %d times", n)
	}
	if code := apiStatus(t, hs.URL+"/healthz"); code != http.StatusOK || wraps.Load() != 1 {
		t.Errorf("other routes: status %d, %d wrapped requests; want 200 through Wrap", code, wraps.Load())
	}
}

// apiStatus answers the status of a GET of url.
func apiStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestEventsKeepNoNotification checks that a resource event in the ring
// holds none of the notification it came from: the status events of a
// statement arrive as one payload, and an event holding a piece of it
// would keep all of it for as long as the ring keeps the event.
func TestEventsKeepNoNotification(t *testing.T) {
	t.Parallel()
	h := newHub(nil, slog.New(slog.DiscardHandler), nil)
	payload := strings.Repeat(" ", 4000) +
		`{"id":7,"kind":"Widget","namespace":"team-a","name":"w","source":"infra","status":"ready","status_message":"","generation":1,"observed_generation":1,"deleted":false,"suspended":false}`
	ev, ok := h.translate(t.Context(), store.Notification{Topic: store.TopicStatus, Payload: payload})
	if !ok || ev.kind != "Widget" || ev.namespace != "team-a" || ev.source != "infra" || ev.id != 7 {
		t.Fatalf("translate = %+v, %v", ev, ok)
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(payload)))
	for _, s := range []string{ev.kind, ev.namespace, ev.source, ev.name} {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); s != "" && p >= start && p < start+uintptr(len(payload)) {
			t.Errorf("the event's %q points into the notification's payload", s)
		}
	}
}

// TestEventsMaskSecretsTheCutLeft checks that a secret the store's cut of
// a long status message went through does not reach a stream in part: the
// event carries only the secret's start, which masking whole values
// cannot recognise.
func TestEventsMaskSecretsTheCutLeft(t *testing.T) {
	t.Parallel()
	const secret = "SUPERSECRETTOKEN-0123456789abcdef"
	m := redact.New(secret)
	h := newHub(nil, slog.New(slog.DiscardHandler), m.MaskJSON)
	h.maskCutTail = func(s string) string { return m.MaskCut(s, false, true) }
	for _, before := range []int{store.MaxStatusMessage - 10, store.MaxStatusMessage - len(secret), store.MaxStatusMessage - 500} {
		msg := []rune(strings.Repeat("é", before) + secret + strings.Repeat("x", 600))
		cut := string(msg[:store.MaxStatusMessage]) // as the stores cut it
		payload, err := json.Marshal(store.StatusEvent{ID: 1, Kind: "Widget", Name: "w", Message: cut})
		if err != nil {
			t.Fatal(err)
		}
		ev, ok := h.translate(t.Context(), store.Notification{Topic: store.TopicStatus, Payload: string(payload)})
		if !ok {
			t.Fatal("translate failed")
		}
		h.publish(ev)
		frame := string(h.ring[(h.next-1)%eventRing].frame)
		if strings.Contains(frame, secret[:redact.MinPiece]) {
			t.Errorf("with the secret at character %d, a piece of it reaches the stream: %s", before, frame)
		}
		if !strings.Contains(frame, "éé") {
			t.Errorf("with the secret at character %d, the message is gone: %s", before, frame)
		}
	}
}
