package notify_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/notify"
	"github.com/no8s/no8s-agent/notify/notifytest"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

func notice(event, source, kind string, labels map[string]string) *store.Notice {
	return &store.Notice{ID: 7, Event: event, Severity: "error", Source: source, Kind: kind, Name: "x", Generation: 3,
		Labels: labels, Message: "boom", Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567",
		CreatedAt: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
}

func inNamespace(n *store.Notice, ns string) *store.Notice {
	n.Namespace = ns
	return n
}

func TestRoute(t *testing.T) {
	t.Parallel()
	d := notify.New(nil, notify.Options{
		Alerts: []notify.Alert{
			{Providers: []string{"chat", "hook"}},
			{Providers: []string{"hook"}, Events: []string{store.EventDriftDetected}, Sources: []string{"infra"}},
			{Providers: []string{"db-team"}, Kinds: []string{"DatabaseCluster"}, Labels: map[string]string{"team": "db"}},
			{Providers: []string{"team-a"}, Namespaces: []string{"team-a"}, Events: []string{store.EventResourceFailed, store.EventSourceFailed}},
		},
		Commits: []string{"commits"},
		Follows: func(_, source string) bool { return source == "infra" },
	})
	tests := []struct {
		name string
		n    *store.Notice
		want []string
	}{
		{"failure, default events", notice(store.EventResourceFailed, "infra", "Widget", nil), []string{"chat", "hook"}},
		{"drift, only where asked", notice(store.EventDriftDetected, "infra", "Widget", nil), []string{"hook"}},
		{"drift of another source", notice(store.EventDriftDetected, "apps", "Widget", nil), nil},
		{"kind and labels", notice(store.EventResourceRecovered, "apps", "DatabaseCluster", map[string]string{"team": "db", "x": "y"}),
			[]string{"chat", "db-team", "hook"}},
		{"labels that differ", notice(store.EventResourceRecovered, "apps", "DatabaseCluster", map[string]string{"team": "web"}),
			[]string{"chat", "hook"}},
		{"a source's event never matches labels", notice(store.EventSourceFailed, "apps", "", nil), []string{"chat", "hook"}},
		{"a failure in team-a's namespace", inNamespace(notice(store.EventResourceFailed, "infra", "Widget", nil), "team-a"),
			[]string{"chat", "hook", "team-a"}},
		{"a failure in team-b's namespace", inNamespace(notice(store.EventResourceFailed, "infra", "Widget", nil), "team-b"), []string{"chat", "hook"}},
		{"a cluster-scoped failure never matches namespaces", notice(store.EventResourceFailed, "infra", "Zone", nil), []string{"chat", "hook"}},
		{"a source's event never matches namespaces", notice(store.EventSourceFailed, "infra", "", nil), []string{"chat", "hook"}},
		{"applied revision to commit statuses", notice(store.EventRevisionApplied, "infra", "", nil), []string{"commits"}},
		{"applied revision of a source not followed", notice(store.EventRevisionApplied, "apps", "", nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := d.Route(tt.n); !slices.Equal(got, tt.want) {
				t.Errorf("Route = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWebhookDeliver(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-for-hmac-01"
	r := notifytest.NewReceiver(t, secret)
	w := &notify.Webhook{URL: r.URL + "/hook?token=query-secret", Secret: secret}
	n := inNamespace(notice(store.EventResourceFailed, "infra", "Widget", nil), "team-a")
	if done, _, err := w.Deliver(t.Context(), n, store.Delivery{}); !done || err != nil {
		t.Fatalf("Deliver = %v, %v", done, err)
	}
	got := r.Accepted()
	if len(got) != 1 || got[0].ID != 7 || got[0].Event.Resource == nil || got[0].Event.Resource.Generation != 3 ||
		got[0].Event.Resource.Namespace != "team-a" ||
		got[0].Event.Message != "boom" || !got[0].Event.Time.Equal(n.CreatedAt) || len(r.Bad()) > 0 {
		t.Fatalf("accepted %+v, bad %q", got, r.Bad())
	}
	// A receiver that is down is retried; a wrong signature is not.
	r.SetDown(true)
	_, _, err := w.Deliver(t.Context(), n, store.Delivery{})
	var perm *notify.PermanentError
	if err == nil || errors.As(err, &perm) || !strings.Contains(err.Error(), "503") || strings.Contains(err.Error(), "query-secret") {
		t.Errorf("Deliver to a receiver that is down: %v", err)
	}
	bad := &notify.Webhook{URL: r.URL, Secret: "not-the-secret"}
	if _, _, err := bad.Deliver(t.Context(), n, store.Delivery{}); !errors.As(err, &perm) || !strings.Contains(err.Error(), "401") {
		t.Errorf("Deliver with a wrong secret: %v, want a permanent 401", err)
	}
	// A network error names the host, not the URL's secret path.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	w = &notify.Webhook{URL: gone.URL + "/services/T0/B0/secret-path"}
	if _, _, err := w.Deliver(t.Context(), n, store.Delivery{}); err == nil || errors.As(err, &perm) || strings.Contains(err.Error(), "secret-path") {
		t.Errorf("Deliver to a closed port: %v", err)
	}
}

func TestSlackText(t *testing.T) {
	t.Parallel()
	s := &notify.Slack{DashboardURL: "https://no8s.example.com/"}
	got := s.Text(notify.NewEvent(notice(store.EventResourceFailed, "in fra", "Widget", nil)))
	for _, want := range []string{":red_circle: *ResourceFailed* Widget/x (generation 3) in source *in fra*",
		"`main@sha1:0123456789abcdef0123456789abcdef01234567`", "```boom```", "<https://no8s.example.com/sources/in%20fra|Open the dashboard>"} {
		if !strings.Contains(got, want) {
			t.Errorf("Text lacks %q:\n%s", want, got)
		}
	}
}

// TestSlackTextNamespace: a resource outside the default namespace is
// written Kind/namespace/name, as the CLI takes it.
func TestSlackTextNamespace(t *testing.T) {
	t.Parallel()
	e := notify.NewEvent(inNamespace(notice(store.EventResourceFailed, "infra", "Widget", nil), "team-a"))
	if got := (&notify.Slack{}).Text(e); !strings.Contains(got, "Widget/team-a/x (generation 3)") {
		t.Errorf("Text lacks the namespace:\n%s", got)
	}
}

func TestOnGitHub(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]bool{
		"https://github.com/acme/infra.git": true, "git@github.com:acme/infra.git": true, "https://github.com/acme": false,
		"/srv/git/infra": false, "https://github.com/acme/infra/extra": false,
	} {
		if got := notify.OnGitHub(url); got != want {
			t.Errorf("OnGitHub(%q) = %v, want %v", url, got, want)
		}
	}
}

func TestSlackDeliver(t *testing.T) {
	t.Parallel()
	var got struct {
		Text string `json:"text"`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&got) != nil {
			http.Error(w, "invalid_payload", http.StatusBadRequest)
			return
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	s := &notify.Slack{URL: srv.URL + "/services/T0/B0/secret-path", Masker: redact.New("tok-1234<&>5678")}
	n := notice(store.EventSourceFailed, "infra", "", nil)
	n.Message = "boom with tok-1234<&>5678"
	if done, _, err := s.Deliver(t.Context(), n, store.Delivery{}); !done || err != nil {
		t.Fatalf("Deliver = %v, %v", done, err)
	}
	if !strings.Contains(got.Text, "*SourceFailed* in source *infra*") || !strings.Contains(got.Text, "```boom with ***```") {
		t.Errorf("Slack got %q", got.Text)
	}
}

// TestEventNamespace: an event about a resource names its namespace, in
// its JSON and its subject; one in the default namespace, or of a
// cluster-scoped kind, reads as before.
func TestEventNamespace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ ns, subject, resource string }{
		{"team-a", "ResourceFailed Widget/team-a/x (source infra)", `{"kind":"Widget","namespace":"team-a","name":"x","generation":3}`},
		{"default", "ResourceFailed Widget/x (source infra)", `{"kind":"Widget","namespace":"default","name":"x","generation":3}`},
		{"", "ResourceFailed Widget/x (source infra)", `{"kind":"Widget","name":"x","generation":3}`},
	} {
		n := notice(store.EventResourceFailed, "infra", "Widget", nil)
		n.Namespace = tc.ns
		e := notify.NewEvent(n)
		if got := e.Subject(); got != tc.subject {
			t.Errorf("namespace %q: subject %q, want %q", tc.ns, got, tc.subject)
		}
		b, err := json.Marshal(e.Resource)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.resource {
			t.Errorf("namespace %q: resource %s, want %s", tc.ns, b, tc.resource)
		}
	}
}
