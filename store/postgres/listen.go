package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/store"
)

// Reconnection delays of a listener whose connection dropped.
const (
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
)

// Listen subscribes to topics on a connection of its own (LISTEN holds a
// session, so it cannot share the pool's). A goroutine owned by ctx reads
// notifications and sends them, in order, on the returned channel; when the
// connection drops it reconnects with backoff, listens again and sends a
// Resync notification, because what was sent meanwhile is lost. The first
// connection is made before Listen returns, so a wrong URL fails here.
func (s *Store) Listen(ctx context.Context, topics ...string) (<-chan store.Notification, error) {
	if s.tx != nil {
		return nil, invalid("listen inside a transaction")
	}
	if len(topics) == 0 {
		return nil, invalid("listen: no topics")
	}
	conn, err := s.listenConn(ctx, topics)
	if err != nil {
		return nil, err
	}
	ch := make(chan store.Notification, 64)
	go s.listen(ctx, conn, topics, ch)
	return ch, nil
}

// listenConn connects and listens to topics.
func (s *Store) listenConn(ctx context.Context, topics []string) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("postgres: listen: connect: %w", unavailable(err))
	}
	for _, t := range topics {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{t}.Sanitize()); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("postgres: listen to %s: %w", t, err)
		}
	}
	return conn, nil
}

// listen delivers notifications until ctx is done, reconnecting as needed.
func (s *Store) listen(ctx context.Context, conn *pgx.Conn, topics []string, ch chan<- store.Notification) {
	defer close(ch)
	send := func(n store.Notification) bool {
		select {
		case ch <- n:
			return true
		case <-ctx.Done():
			return false
		}
	}
	backoff := listenMinBackoff
	for {
		for conn != nil {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				conn.Close(closeCtx)
				cancel()
				conn = nil
				if ctx.Err() != nil {
					return
				}
				slog.Default().Warn("store notifications interrupted; reconnecting", "error", err)
				if !send(store.Notification{Interrupted: true}) {
					return
				}
				break
			}
			backoff = listenMinBackoff
			for _, payload := range splitPayload(n.Channel, n.Payload) {
				if !send(store.Notification{Topic: n.Channel, Payload: payload}) {
					return
				}
			}
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, listenMaxBackoff)
		c, err := s.listenConn(ctx, topics)
		if err != nil {
			continue
		}
		conn = c
		if !send(store.Notification{Resync: true}) {
			conn.Close(context.WithoutCancel(ctx))
			return
		}
	}
}

// splitPayload returns the payloads that one notification carries: the
// status events of one statement come together as a JSON array (see the
// migration that sends them), and are handed out one by one, as events of
// a single row are sent.
//
// Every status notification passes through here, so the array is split
// by a scan of its bytes rather than decoded: the events are handed on as
// text, and whoever reads one decodes it then.
func splitPayload(topic, payload string) []string {
	if topic != store.TopicStatus || !strings.HasPrefix(payload, "[") {
		return []string{payload}
	}
	out, ok := splitArray(payload)
	if !ok {
		// Whoever reads it says it is unreadable.
		return []string{payload}
	}
	return out
}

// splitArray returns the elements of the JSON array s, without the space
// around them, or false when s is not an array whose elements are closed
// (unbalanced brackets or quotes, an empty element, text after the end).
// It does not check the elements' own grammar: their readers do.
func splitArray(s string) ([]string, bool) {
	if len(s) < 2 || s[0] != '[' {
		return nil, false
	}
	var (
		out   []string
		depth = 0 // of brackets and braces inside the array
		start = 1 // of the current element
	)
	element := func(end int) bool {
		e := strings.TrimSpace(s[start:end])
		if e == "" {
			return false
		}
		out = append(out, e)
		return true
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '"':
			// Skip the string, and the escaped characters in it.
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			if i >= len(s) {
				return nil, false
			}
		case '[', '{':
			depth++
		case '}':
			depth--
			if depth < 0 {
				return nil, false
			}
		case ']':
			if depth > 0 {
				depth--
				continue
			}
			// The array's end: an empty array, or the last element.
			if strings.TrimSpace(s[i+1:]) != "" {
				return nil, false
			}
			if len(out) == 0 && strings.TrimSpace(s[1:i]) == "" {
				return []string{}, true
			}
			return out, element(i)
		case ',':
			if depth == 0 {
				if !element(i) {
					return nil, false
				}
				start = i + 1
			}
		}
	}
	return nil, false
}
