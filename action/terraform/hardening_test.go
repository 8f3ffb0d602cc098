package terraform_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/terraform"
	"github.com/no8s/no8s-agent/action/terraform/tofutest"
)

// A backend template that joins the identity's parts with a separator that
// a part may hold itself renders the same key for two resources (tf's
// "eu-db" and tf-eu's "db" under "{{ .Instance }}-{{ .Name }}"), which
// would give them one state: it is refused at start. Templates whose parts
// cannot run into each other are accepted.
func TestBackendTemplateAmbiguousKeysRefused(t *testing.T) {
	t.Parallel()
	work := filepath.Join(t.TempDir(), "work")
	for _, tc := range []struct {
		key     string
		refused bool
	}{
		{"{{ .Kind }}/{{ .Instance }}-{{ .Name }}", true},
		{"{{ .Instance }}-{{ .Name }}-{{ .Kind }}", true},
		{"{{ .Instance }}{{ .Kind }}{{ .Name }}", true},
		{"{{ .Kind }}/{{ .Instance }}--{{ .Name }}", true},
		{"{{ .Kind }}/{{ .Name }}_{{ .Instance }}", false},
		{"{{ .Key }}", false},
		{"{{ .Instance }}/{{ .Kind }}/{{ .Name }}", false},
		{"{{ .Instance }}-{{ .Kind }}-{{ .Name }}", false},
		{"{{ .Kind }}.{{ .Name }}.{{ .Instance }}", false},
	} {
		backend := fmt.Sprintf(`backend "http" { address = "http://127.0.0.1:1/state/%s" }`, tc.key)
		_, err := newInstance(t, "tf", dbModule, work, map[string]any{"backend": backend})
		switch {
		case tc.refused && (err == nil || !strings.Contains(err.Error(), "backend: ") || !strings.Contains(err.Error(), "renders the same")):
			t.Errorf("backend key %s: error %v, want a refusal naming two resources with one key", tc.key, err)
		case !tc.refused && err != nil:
			t.Errorf("backend key %s: %v", tc.key, err)
		}
	}
}

// handleEnv makes the test binary print the handle that an attempt run by
// it would record, then wait until its stdin closes: a run that goes on.
const handleEnv = "NO8S_TERRAFORM_TEST_HANDLE"

func printHandle() int {
	fmt.Println(terraform.EncodeHandle(os.Getpid()))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// A run recorded by an agent in another PID namespace of the same host
// name (a pod on the host's network, a container given the host's name)
// cannot be told from here: its pid means another process, or none, in
// this namespace. The next attempt must not take it for gone and force
// the lock it holds.
func TestTakeoverFromAnotherPIDNamespace(t *testing.T) {
	t.Parallel()
	srv := tofutest.NewStateServer(t)
	f := newFixture(t, dbModule, map[string]any{"backend": srv.Backend()})
	ctx := t.Context()
	if _, err := f.act.Apply(ctx, request("ns", 1, `{"size": 1}`, &recorder{})); err != nil {
		t.Fatalf("first apply: %v", err)
	}

	// The previous run, in a PID namespace of its own, holds the lock.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	other := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", self, "-test.run=^$")
	other.Env = append(os.Environ(), handleEnv+"=1")
	var stderr strings.Builder
	other.Stderr = &stderr
	stdin, stdout := startPiped(t, other)
	t.Cleanup(func() { stdin.Close(); _ = other.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the handle from the other namespace: %v (%s)", err, stderr.String())
	}
	srv.Lock("tf", "Database", "ns", "lock-of-the-other-namespace")

	req := request("ns", 2, `{"size": 2}`, &recorder{})
	req.PriorHandle = &action.Handle{Value: strings.TrimSpace(line), Operation: action.OperationApply, Generation: 1}
	_, err = f.act.Apply(ctx, req)
	if err == nil || !strings.Contains(err.Error(), "not known to be gone") {
		t.Errorf("apply over the run of another namespace (handle %s): %v", strings.TrimSpace(line), err)
	}
	if !srv.Held("tf", "Database", "ns") {
		t.Error("the lock of a run that may still go on was forced")
	}
}

// An instance's folder that is a symlink (moved to another disk) still
// holds its resources: one bound to another instance is refused.
func TestInstanceChangeRefusedThroughSymlink(t *testing.T) {
	t.Parallel()
	work := filepath.Join(t.TempDir(), "work")
	events := filepath.Join(t.TempDir(), "events")
	a := mustInstance(t, "tf-a", fmt.Sprintf(recordingModule, "a", events), work, nil)
	b := mustInstance(t, "tf-b", fmt.Sprintf(recordingModule, "b", events), work, nil)
	if _, err := a.Apply(t.Context(), request("linked", 1, `{}`, &recorder{})); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "tf-a")
	if err := os.Rename(filepath.Join(work, "tf-a"), elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(work, "tf-a")); err != nil {
		t.Fatal(err)
	}
	_, err := b.Apply(t.Context(), request("linked", 2, `{}`, &recorder{}))
	if err == nil || !strings.Contains(err.Error(), `has state under terraform instance "tf-a"`) {
		t.Errorf("apply by tf-b: %v", err)
	}
	if got := readEvents(t, events); got != "created a" {
		t.Errorf("events: %q", got)
	}
}
