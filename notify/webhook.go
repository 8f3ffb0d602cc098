package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

// Headers of a webhook delivery. The signature is the http action's
// scheme: "sha256=" and the hex HMAC-SHA256 of the body, keyed with the
// secret.
const (
	HeaderSignature = "X-No8s-Signature-256"
	HeaderEvent     = "X-No8s-Event"
	HeaderDelivery  = "X-No8s-Delivery"
)

// Webhook POSTs each event as JSON, signed when it has a secret.
type Webhook struct {
	URL    string
	Secret string
	// Masker hides secrets in the event, before it is encoded, and in the
	// body; nil leaves them as they are.
	Masker *redact.Masker
	// Client sends the requests; nil is http.DefaultClient. Redirects are
	// never followed, whatever its CheckRedirect.
	Client *http.Client
}

// Deliver posts the event; 2xx is delivered, 408, 429 and 5xx and network
// errors are retried, other answers are permanent.
func (w *Webhook) Deliver(ctx context.Context, n *store.Notice, _ store.Delivery) (bool, time.Duration, error) {
	body, err := json.Marshal(redact.MaskValues(w.Masker, NewEvent(n)))
	if err != nil {
		return false, 0, &PermanentError{err}
	}
	body = w.Masker.MaskJSON(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return false, 0, &PermanentError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "no8s-agent")
	req.Header.Set(HeaderEvent, n.Event)
	req.Header.Set(HeaderDelivery, strconv.FormatInt(n.ID, 10))
	if w.Secret != "" {
		mac := hmac.New(sha256.New, []byte(w.Secret))
		mac.Write(body)
		req.Header.Set(HeaderSignature, "sha256="+hex.EncodeToString(mac.Sum(nil)))
	}
	return post(w.client(), req)
}

func (w *Webhook) client() *http.Client {
	if w.Client != nil {
		return w.Client
	}
	return http.DefaultClient
}

// post sends req and classifies the answer. Errors name the host only:
// the path and query of a webhook URL may be its secret (Slack's are).
//
// A redirect is not followed, as the http action does not follow one:
// following it would send the body and its signature (or, for Slack, the
// message) to a URL that the operator did not configure. It fails the
// delivery for good, saying so, and the URL it points to is not contacted.
func post(c *http.Client, req *http.Request) (bool, time.Duration, error) {
	target := req.URL.Scheme + "://" + req.URL.Host
	refusing := *c
	refusing.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := refusing.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return false, 0, fmt.Errorf("POST %s: %w", target, err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	err = fmt.Errorf("POST %s: %s: %s", target, resp.Status, bytes.TrimSpace(snippet))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return true, 0, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return false, 0, &PermanentError{fmt.Errorf("POST %s: %s: the receiver redirects, and redirects are not followed "+
			"(the body and its signature would go to a URL that is not configured): configure the URL it redirects to", target, resp.Status)}
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return false, 0, err
	}
	return false, 0, &PermanentError{err}
}
