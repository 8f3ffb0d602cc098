package main

import (
	"bufio"
	"crypto/rand"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGitLabWebhookHostile sends an agent that accepts signed GitLab
// deliveries, and no token, what an attacker can without the key: a
// body that never ends, which must not hold the connection; and a signed
// push replayed as another event (X-Gitlab-Event is not signed), which
// must act on nothing and leave GitLab's own delivery of that id to be
// acted on.
func TestGitLabWebhookHostile(t *testing.T) {
	t.Parallel()
	f := newGitLabFixture(t, "{gitlabSigningKeyEnv: %[2]s}")
	host := strings.TrimPrefix(f.base, "http://")

	// A body announced and never sent: the signature cannot be checked
	// before it is in, and the agent does not wait for it past its body
	// deadline (10 seconds).
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	if _, err := conn.Write([]byte("POST /hooks/gitlab HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\n" +
		"X-Gitlab-Event: Push Hook\r\nwebhook-id: slow\r\nwebhook-timestamp: " + ts + "\r\nwebhook-signature: v1,AAAA\r\n" +
		"Content-Length: 1000000\r\n\r\n{\"object_kind\": ")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := conn.SetReadDeadline(start.Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body after %v: %v", time.Since(start), err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Errorf("stalled body answered %d", resp.StatusCode)
	}

	head, before := f.commit(3)
	body := f.push(before, head)
	id := "msg-" + rand.Text()
	asTag := gitlabDelivery{event: "Tag Push Hook", body: body, key: f.key, id: id, at: time.Now()}
	f.git.Take()
	if code, resp := asTag.send(t, f.base); code != http.StatusBadRequest {
		t.Fatalf("push sent as a tag push: %d %s, want 400", code, resp)
	}
	if got := f.git.Take(); len(got) != 0 {
		t.Errorf("a push sent as a tag push fetched: %v", got)
	}
	if rev := f.revision(t); strings.HasSuffix(rev, head) {
		t.Fatalf("a push sent as a tag push synced %s", rev)
	}
	asPush := asTag
	asPush.event = "Push Hook"
	if code, resp := asPush.send(t, f.base); code != http.StatusOK || !strings.Contains(resp, `"triggered":["sites"]`) {
		t.Fatalf("the push under its own event: %d %s", code, resp)
	}
	waitFor(t, 30*time.Second, f.agent, "the push to be synced", func() (bool, string) {
		return strings.HasSuffix(f.revision(t), head), f.revision(t)
	})
	f.waitMetric(t, `no8s_webhook_deliveries_total{event="gitlab_tag_push",result="invalid"} 1`)
}
