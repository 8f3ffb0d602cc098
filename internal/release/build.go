package release

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// buildBinary builds the agent for t into out: static (no cgo), paths
// trimmed, no VCS stamp (the commit is stamped through -X, so a checkout
// and a source archive of it give the same bytes), symbols stripped, and
// version, commit and build date stamped where the version command reads
// them (cmd/no8s-agent/version.go).
func buildBinary(ctx context.Context, o Options, t Target, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	ldflags := strings.Join([]string{
		"-s", "-w",
		"-X", "main.version=" + o.Version,
		"-X", "main.commit=" + o.Commit,
		"-X", "main.buildDate=" + o.Time.Format(time.RFC3339),
	}, " ")
	cmd := exec.CommandContext(ctx, o.Go, "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags,
		"-o", out, "./cmd/no8s-agent")
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch,
		// The baseline of each architecture, whatever the environment
		// says: the binaries run on every machine of it, and the
		// build does not depend on who ran it.
		"GOAMD64=v1", "GOARM64=v8.0",
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("release: go build for %s: %w\n%s", t, err, stderr.Bytes())
	}
	return nil
}

// completionShells are the shells completions are made for, with the
// file name each looks for.
var completionShells = []struct{ Shell, File string }{
	{"bash", Name},
	{"fish", Name + ".fish"},
	{"zsh", "_" + Name},
}

// completions runs bin's completion command for each shell and returns the
// scripts, by shell.
func completions(ctx context.Context, bin string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, s := range completionShells {
		cmd := exec.CommandContext(ctx, bin, "completion", s.Shell)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		// No configuration or environment of this machine may change what
		// the scripts say.
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + os.TempDir()}
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("release: %s completion %s: %w\n%s", bin, s.Shell, err, stderr.Bytes())
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("release: %s completion %s printed nothing", bin, s.Shell)
		}
		out[s.Shell] = b
	}
	return out, nil
}
