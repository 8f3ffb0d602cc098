package notify_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/notify"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

// TestDeliveryRefusesRedirects points each provider that posts to a URL at
// a receiver that redirects to a second server: the delivery fails for
// good with a message that says why, and the second server never hears of
// it, neither the body nor the signature.
func TestDeliveryRefusesRedirects(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		for _, kind := range []string{"webhook", "slack"} {
			t.Run(fmt.Sprintf("%s %d", kind, code), func(t *testing.T) {
				t.Parallel()
				var elsewhere atomic.Int64
				target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					elsewhere.Add(1)
				}))
				t.Cleanup(target.Close)
				redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, target.URL+"/collect?from=no8s", code)
				}))
				t.Cleanup(redirecting.Close)
				var p notify.Provider = &notify.Webhook{URL: redirecting.URL + "/hook", Secret: "redirect-secret-1"}
				if kind == "slack" {
					p = &notify.Slack{URL: redirecting.URL + "/services/T0/B0/redirect-path"}
				}
				done, _, err := p.Deliver(t.Context(), notice(store.EventResourceFailed, "infra", "Widget", nil), store.Delivery{})
				var perm *notify.PermanentError
				if done || err == nil || !errors.As(err, &perm) {
					t.Fatalf("Deliver = %v, %v; want a permanent failure", done, err)
				}
				if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(code)) || !strings.Contains(msg, "redirect") ||
					strings.Contains(msg, target.URL) || strings.Contains(msg, "redirect-path") {
					t.Errorf("error %q: want the status and that redirects are not followed, without the URLs", msg)
				}
				if n := elsewhere.Load(); n != 0 {
					t.Errorf("the redirect's target got %d requests", n)
				}
			})
		}
	}
}

// safeBuffer is a log sink safe for the dispatcher's goroutines.
type safeBuffer struct {
	mu gosync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSlackEchoedPathMasked delivers to a Slack URL whose receiver answers
// with an error body that echoes the URL's path, as a misconfigured proxy
// does: the delivery error kept in the store and the log hold neither the
// path nor the token in it.
func TestSlackEchoedPathMasked(t *testing.T) {
	t.Parallel()
	const token = "xYz123SecretToken9"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no_service: no route for "+r.URL.Path+" (token "+token+")", http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	slackURL := srv.URL + "/services/T0AB12CD/B0EF34GH/" + token
	m := redact.New(slackURL)
	var logs safeBuffer
	log := slog.New(m.Handler(slog.NewTextHandler(&logs, nil)))
	st := openStore(t)
	failures(t, st, 1)
	d := notify.New(st, notify.Options{Owner: "a1", Poll: 20 * time.Millisecond, Logger: log, Masker: m,
		Providers: map[string]notify.Provider{"chat": &notify.Slack{URL: slackURL, Masker: m}},
		Alerts:    []notify.Alert{{Providers: []string{"chat"}}}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var got store.Delivery
	deadline := time.Now().Add(30 * time.Second)
	for got.Result != store.DeliveryGaveUp {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the delivery is %+v, want given up", got)
		}
		ns, err := st.ListNotices(t.Context(), "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) == 1 {
			got = ns[0].Results["chat"]
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
		}
	}
	cancel()
	<-done
	if !strings.Contains(got.Error, "404") || !strings.Contains(got.Error, "no route for ***") {
		t.Errorf("delivery error %q: want the answer, masked", got.Error)
	}
	for _, part := range []string{token, "B0EF34GH/" + token, "/services/T0AB12CD"} {
		if strings.Contains(got.Error, part) {
			t.Errorf("the delivery error holds %q: %s", part, got.Error)
		}
		if strings.Contains(logs.String(), part) {
			t.Errorf("the log holds %q:\n%s", part, logs.String())
		}
	}
}
