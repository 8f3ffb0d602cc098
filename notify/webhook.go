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
	// Mask hides secrets in the body; nil leaves it as it is.
	Mask   func([]byte) []byte
	Client *http.Client
}

// Deliver posts the event; 2xx is delivered, 408, 429 and 5xx and network
// errors are retried, other answers are permanent.
func (w *Webhook) Deliver(ctx context.Context, n *store.Notice, _ store.Delivery) (bool, time.Duration, error) {
	body, err := json.Marshal(NewEvent(n))
	if err != nil {
		return false, 0, &PermanentError{err}
	}
	if w.Mask != nil {
		body = w.Mask(body)
	}
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
func post(c *http.Client, req *http.Request) (bool, time.Duration, error) {
	target := req.URL.Scheme + "://" + req.URL.Host
	resp, err := c.Do(req)
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
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return false, 0, err
	}
	return false, 0, &PermanentError{err}
}
