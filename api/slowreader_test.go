package api_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

const blobType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Blob}
spec:
  versions:
    - name: v1
      schema:
        type: object
        properties:
          data: {type: string}
`

// TestSlowReaderHoldsNoReadSlot asks for a page of about 12 MB on a
// connection that never reads it, with one read slot. Reads that need the
// slot must still be answered at once, and the stalled answer is cut off
// after its write timeout rather than held for ever.
func TestSlowReaderHoldsNoReadSlot(t *testing.T) {
	t.Parallel()
	const writeTimeout = 3 * time.Second
	e := newEnv(t, func(o *api.Options) {
		o.MaxConcurrentReads = 1
		o.ResponseWriteTimeout = writeTimeout
	})
	files := []manifest.File{file("types/blob.yaml", blobType)}
	data := strings.Repeat("x", 100<<10)
	for i := range 120 {
		files = append(files, file(fmt.Sprintf("blobs/b%03d.yaml", i),
			fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Blob\nmetadata: {name: b%03d}\nspec: {data: %s}\n", i, data)))
	}
	snap := &source.Snapshot{Revision: manifest.Revision("main@sha1:" + strings.Repeat("cd", 20)), Files: files}
	if _, err := e.syncer.Sync(t.Context(), sync.Target{Name: "bulk", Kind: store.SourceGit, URL: "https://git.example.com/bulk.git"}, snap, false); err != nil {
		t.Fatal(err)
	}

	// A client with a tiny receive window, which reads one byte of the
	// answer (so the server is writing it) and then nothing.
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := dialer.DialContext(t.Context(), "tcp", strings.TrimPrefix(e.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The page is asked for at a store version after the sync, which the
	// read model then has.
	v, err := e.store.Fence(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "GET /api/v1/resources?kind=Blob&limit=500&minVersion=%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", v); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	slow := bufio.NewReaderSize(conn, 16)
	if line, err := slow.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("the large page's status line: %q %v", line, err)
	}
	sent := time.Now()

	// Reads that take the slot, while the page waits on the client.
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range 12 {
		path := []string{"/api/v1/sources", "/api/v1/resources?kind=Network&limit=1",
			fmt.Sprintf("/api/v1/resources/%d", e.gitRes.ID)}[i%3]
		start := time.Now()
		resp, err := client.Get(e.http.URL + path)
		if err != nil {
			t.Fatalf("read %d (%s) while a client stalls: %v", i, path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("read %d (%s) while a client stalls: %d, Retry-After %q", i, path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("read %d (%s) took %s while a client stalls", i, path, d)
		}
	}

	// The stalled answer is cut once its write timeout passes: reading what
	// is left ends early, well before the whole page has come.
	select {
	case <-t.Context().Done():
		return
	case <-time.After(time.Until(sent.Add(writeTimeout + time.Second))):
	}
	n, err := io.Copy(io.Discard, slow)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading the rest of the stalled answer: %v after %d bytes", err, n)
	}
	if n > 11<<20 {
		t.Fatalf("the stalled answer arrived whole (%d bytes) after its write timeout", n)
	}
}
