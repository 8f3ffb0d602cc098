package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/api"
)

// TestReadLimit holds the only read slot with a read of the store that
// waits on a table lock, and checks that further reads of the store are
// answered 503 with Retry-After instead of piling onto the database, that
// the reads the read model answers, the event stream and health are not
// limited, and that reads are served again once the slot is free.
func TestReadLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *api.Options) { o.MaxConcurrentReads = 1 })
	ctx := t.Context()
	// The read model has the resources before the table is locked.
	e.must("GET", "/api/v1/resources", "", "", http.StatusOK, nil)
	locker, err := pgx.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "LOCK TABLE resources IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	type result struct {
		status     int
		retryAfter string
		body       string
	}
	get := func(path string) <-chan result {
		ch := make(chan result, 1)
		go func() {
			resp, err := http.Get(e.http.URL + path)
			if err != nil {
				ch <- result{body: err.Error()}
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			ch <- result{resp.StatusCode, resp.Header.Get("Retry-After"), string(body)}
		}()
		return ch
	}
	wait := func(ch <-chan result, what string) result {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer within 10s", what)
			return result{}
		}
	}

	// Outputs are read from the store, not the read model.
	holder := get("/api/v1/resources/" + itoa(e.gitRes.ID) + "/outputs")
	// The holder has the slot once its query waits on the lock.
	deadline := time.After(10 * time.Second)
	for {
		var waiting int
		if err := locker.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case <-deadline:
			t.Fatal("the first read never reached the database")
		case <-time.After(10 * time.Millisecond):
		}
	}

	// More reads than the queue takes: each is refused, some at once and
	// the queued ones when their wait runs out, none waits on the lock.
	var others []<-chan result
	for i := range 12 {
		path := "/api/v1/resources/" + itoa(e.gitRes.ID) + "/outputs"
		if i%2 == 0 {
			path = "/api/v1/agents"
		}
		others = append(others, get(path))
	}
	for i, ch := range others {
		r := wait(ch, "a read beyond the limit")
		var body api.ErrorBody
		if r.status != http.StatusServiceUnavailable || r.retryAfter != "1" {
			t.Fatalf("read %d = %d Retry-After %q %s, want 503 with Retry-After 1", i, r.status, r.retryAfter, r.body)
		}
		if err := json.Unmarshal([]byte(r.body), &body); err != nil || !strings.Contains(body.Error, "too many reads") {
			t.Errorf("read %d: body %s (%v)", i, r.body, err)
		}
	}
	// Reads the read model answers wait neither for a slot nor for the
	// table.
	for _, path := range []string{"/api/v1/resources/" + itoa(e.gitRes.ID), "/api/v1/resources?kind=Network",
		"/api/v1/resources/by-name/Network/v1/prod-vpc", "/api/v1/sources", "/api/v1/resource-types"} {
		if r := wait(get(path), path); r.status != http.StatusOK {
			t.Errorf("%s = %d %s while the table is locked and the slot taken", path, r.status, r.body)
		}
	}
	// Streams and health checks are not reads of the store's tables.
	stream(t, e.http.URL, "")
	if r := wait(get("/healthz"), "healthz"); r.status != http.StatusOK {
		t.Errorf("healthz = %d %s while reads are limited", r.status, r.body)
	}

	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := wait(holder, "the read holding the slot"); r.status != http.StatusOK {
		t.Errorf("the first read = %d %s", r.status, r.body)
	}
	if r := wait(get("/api/v1/resources/"+itoa(e.gitRes.ID)), "a read after the slot is free"); r.status != http.StatusOK {
		t.Errorf("a read after the slot is free = %d %s", r.status, r.body)
	}
}
