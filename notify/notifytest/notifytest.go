// Package notifytest is a webhook receiver for tests of notifications: it
// checks each delivery's signature, records what it accepted, and can be
// told to answer 503 for a while, as a receiver that is down.
package notifytest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	gosync "sync"
	"testing"

	"github.com/no8s/no8s-agent/notify"
)

// Delivery is one request the receiver accepted.
type Delivery struct {
	ID    int64
	Event notify.Event
	Body  string
}

// Receiver is a webhook endpoint.
type Receiver struct {
	*httptest.Server
	secret string

	mu       gosync.Mutex
	down     bool
	accepted []Delivery
	refused  int
	bad      []string
}

// NewReceiver starts a receiver that checks signatures with secret; it
// stops when the test ends.
func NewReceiver(t testing.TB, secret string) *Receiver {
	r := &Receiver{secret: secret}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	mac := hmac.New(sha256.New, []byte(r.secret))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(req.Header.Get(notify.HeaderSignature)), []byte(want)) {
		r.bad = append(r.bad, "bad signature: "+string(body))
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if r.down {
		r.refused++
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	var e notify.Event
	if err := json.Unmarshal(body, &e); err != nil {
		r.bad = append(r.bad, "not an event: "+string(body))
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id, _ := strconv.ParseInt(req.Header.Get(notify.HeaderDelivery), 10, 64)
	if id != e.ID || req.Header.Get(notify.HeaderEvent) != e.Event {
		r.bad = append(r.bad, "headers disagree with the body: "+string(body))
	}
	r.accepted = append(r.accepted, Delivery{ID: id, Event: e, Body: string(body)})
}

// SetDown makes the receiver answer 503 (down) or accept again.
func (r *Receiver) SetDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
}

// Accepted returns the deliveries accepted so far, in order.
func (r *Receiver) Accepted() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.accepted...)
}

// Refused counts the deliveries answered 503.
func (r *Receiver) Refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

// Bad returns what was wrong with requests: bad signatures, bodies that
// are not events, headers that disagree with the body.
func (r *Receiver) Bad() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}

// Count returns how many accepted deliveries are of event, about the
// resource named name when name is not empty.
func (r *Receiver) Count(event, name string) int {
	n := 0
	for _, d := range r.Accepted() {
		if d.Event.Event == event && (name == "" || d.Event.Resource != nil && d.Event.Resource.Name == name) {
			n++
		}
	}
	return n
}
