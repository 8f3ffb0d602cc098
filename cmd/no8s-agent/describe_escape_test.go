package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/client"
	"github.com/no8s/no8s-agent/why"
)

// hostile is text that would drive a terminal: it sets the window's title,
// clears the screen and swaps the text's direction.
const hostile = "\x1b]0;pwned\x07\x1b[2J\u202eevil"

// noTerminalControl fails when out holds a character that drives a
// terminal rather than being shown.
func noTerminalControl(t *testing.T, what, out string) {
	t.Helper()
	if i := strings.IndexAny(out, "\x1b\x07\u202e"); i >= 0 {
		t.Errorf("%s writes a terminal control character at %d:\n%q", what, i, out)
	}
	if !strings.Contains(out, `\x1b`) {
		t.Errorf("%s does not show the escaped text:\n%s", what, out)
	}
}

// TestDescribeWhyEscapesControlCharacters: an explanation carries text
// others wrote (an action's status message in the chain and the root
// cause, a source's message and problems, an annotation's path): describe
// shows it escaped, never as terminal controls.
func TestDescribeWhyEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	until := time.Now().Add(time.Minute)
	w := &why.Why{Reason: why.DependencyNotReady, Message: "waits on " + hostile,
		Chain:      []why.Link{{ID: 2, Kind: "Job", Name: "db", Phase: "failed", Message: hostile}},
		Cause:      &why.Why{Reason: why.Failed, Message: "attempt 1 failed: " + hostile},
		Source:     &why.SourceState{Name: "apps", Phase: "failed", Message: hostile},
		Suspension: &why.Suspension{By: "annotation", Path: "jobs/" + hostile + ".yaml", Reason: hostile},
		Lease:      &why.Lease{Holder: "agent-" + hostile, State: "alive", Until: until},
		Revision:   "main@" + hostile,
		Problems:   []string{"a.yaml:1: " + hostile}}
	var out bytes.Buffer
	describeWhy(&out, w)
	noTerminalControl(t, "describeWhy", out.String())
}

// TestDescribeSourceEscapesControlCharacters: a commit's author and
// message are anyone's who may push, and a sync's problems quote the
// files: describe source shows them escaped.
func TestDescribeSourceEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/sources/apps", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"name": "apps", "kind": "git", "phase": "failed", "message": "ok",
			"last_commit": map[string]any{"author": "mallory " + hostile, "message": "fix " + hostile},
			"errors":      []map[string]any{{"file": "a.yaml", "line": 1, "message": "bad value " + hostile}}})
	})
	mux.HandleFunc("GET /api/v1/sources/apps/history", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("[]"))
	})
	mux.HandleFunc("GET /api/v1/resources", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("[]"))
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	c, err := client.New(hs.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := describeSource(t.Context(), c, &out, "apps"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Last commit:", "bad value"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("describe source does not show %q:\n%s", want, out.String())
		}
	}
	noTerminalControl(t, "describe source", out.String())
}
