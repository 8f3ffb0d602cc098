package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

// Slack posts a readable message to an incoming webhook.
type Slack struct {
	// URL is the incoming webhook's URL, a secret.
	URL string
	// DashboardURL, when set, is linked to from each message.
	DashboardURL string
	// Masker hides secrets in the event, before the message is written,
	// and in the body; nil leaves them as they are.
	Masker *redact.Masker
	// Client sends the requests; nil is http.DefaultClient. Redirects are
	// never followed, whatever its CheckRedirect.
	Client *http.Client
}

// icons mark events by severity.
var icons = map[string]string{"error": ":red_circle:", "warning": ":warning:", "info": ":large_green_circle:"}

// Text is the message of an event: its summary, message and a link to the
// dashboard page of the resource's source or of the source.
func (s *Slack) Text(e Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s *%s*", icons[e.Severity], e.Event)
	if e.Resource != nil {
		fmt.Fprintf(&b, " %s (generation %d)", e.Resource.Ref(), e.Resource.Generation)
	}
	fmt.Fprintf(&b, " in source *%s*", e.Source)
	if e.Revision != "" {
		fmt.Fprintf(&b, " at `%s`", e.Revision)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, "\n```%s```", e.Message)
	}
	if s.DashboardURL != "" {
		link := strings.TrimSuffix(s.DashboardURL, "/") + "/sources/" + url.PathEscape(e.Source)
		fmt.Fprintf(&b, "\n<%s|Open the dashboard>", link)
	}
	return b.String()
}

// Deliver posts the message.
func (s *Slack) Deliver(ctx context.Context, n *store.Notice, _ store.Delivery) (bool, time.Duration, error) {
	body, err := json.Marshal(map[string]string{"text": s.Text(redact.MaskValues(s.Masker, NewEvent(n)))})
	if err != nil {
		return false, 0, &PermanentError{err}
	}
	body = s.Masker.MaskJSON(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return false, 0, &PermanentError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	c := s.Client
	if c == nil {
		c = http.DefaultClient
	}
	return post(c, req)
}
