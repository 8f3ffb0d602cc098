package git

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/no8s/no8s-agent/source"
)

// engine is what fetches objects into the cache. Reading them is go-git's
// work either way.
type engine int

const (
	// engineAuto fetches with the git binary the first time, where it is
	// several times faster than go-git, and for everything but a branch
	// already in the cache; a branch's new commits come through go-git,
	// which spares the processes git starts for each fetch.
	engineAuto engine = iota
	// engineGit fetches with the git binary only: its shallow fetches send
	// only what changed since the commit the cache has.
	engineGit
	// engineGoGit fetches in process, where git is not installed or the SSH
	// key needs a passphrase.
	engineGoGit
)

func (e engine) String() string {
	switch e {
	case engineAuto:
		return "auto"
	case engineGit:
		return "git"
	}
	return "go-git"
}

// waitDelay bounds how long a killed git's pipes may stay open.
const waitDelay = 5 * time.Second

// chooseEngine picks the git binary when it can do the source's fetches.
func (s *Source) chooseEngine() {
	s.engine = engineGoGit
	bin, err := exec.LookPath("git")
	if err != nil {
		return
	}
	if s.protocol == "ssh" {
		// ssh would prompt for a passphrase; go-git takes it from Auth.
		if s.cfg.Auth.SSHKeyPassphrase != "" {
			return
		}
		if _, err := exec.LookPath("ssh"); err != nil {
			return
		}
	}
	s.engine, s.gitBin = engineAuto, bin
}

// gitFetch fetches the target with the git binary; depth 0 means no limit.
func (s *Source) gitFetch(ctx context.Context, t *target, depth int) error {
	return s.gitFetchSpecs(ctx, depth, s.refSpec(t))
}

// gitFetchSpecs fetches refspecs with the git binary; depth 0 means no
// limit.
func (s *Source) gitFetchSpecs(ctx context.Context, depth int, specs ...string) error {
	creds, err := s.gitCredentials()
	if err != nil {
		return err
	}
	defer creds.remove()
	args := []string{
		// Every fetch keeps its pack, so that counting packs tells when to
		// start over, and nothing runs in the background.
		"-c", "fetch.unpackLimit=1", "-c", "transfer.unpackLimit=1",
		"-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "fetch.showForcedUpdates=false",
		"-c", "credential.helper=", "-c", "core.askPass=",
		"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
	}
	if depth > 0 {
		args = append(args, "--depth="+strconv.Itoa(depth))
	}
	args = append(append(args, "--", s.transport), specs...)
	if err := s.runGit(ctx, creds.env, args...); err != nil {
		return s.gitError(ctx, "fetch "+s.location, err)
	}
	return nil
}

// gitError is an error of the git binary, classified like transportError
// classifies go-git's. git's messages are read in the C locale.
func (s *Source) gitError(ctx context.Context, what string, err error) error {
	err = s.redact(err)
	msg := err.Error()
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(msg, sub) {
				return true
			}
		}
		return false
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w (%w)", what, ctxErr, err)
	}
	switch {
	case has("couldn't find remote ref", "no such remote ref"):
		return fmt.Errorf("%s: %s: %w: %w", what, s.wanted(), source.ErrNotFound, err)
	case has("Authentication failed", "could not read Username", "could not read Password",
		"terminal prompts disabled", "returned error: 401", "returned error: 403", "Permission denied (publickey"):
		return fmt.Errorf("%s: %w: %w", what, source.ErrAuth, err)
	case has("Repository not found", "does not appear to be a git repository", "returned error: 404") ||
		(has("fatal: repository '") && has("' not found")):
		// Forges answer 404 for a private repository the credentials may
		// not read, so with credentials it is most likely their fault.
		if s.auth != nil {
			return fmt.Errorf("%s: %w: %w", what, source.ErrAuth, err)
		}
		return fmt.Errorf("%s: %w: %w", what, source.ErrNotFound, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// runGit runs git on the cache in its own process group, killed whole when
// ctx ends, with a clean environment: no system or user configuration, no
// prompts, messages in English. Its error holds the last lines git wrote.
func (s *Source) runGit(ctx context.Context, env []string, args ...string) error {
	// The cache is the agent's own, whoever owns the folder (a volume
	// mounted into a container, say).
	full := append([]string{"--git-dir=" + s.cfg.CacheDir, "-c", "safe.directory=*"}, args...)
	cmd := exec.CommandContext(ctx, s.gitBin, full...)
	cmd.Env = append(gitEnv(), env...)
	cmd.Dir = s.cfg.CacheDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// git forks helpers (remote-http, upload-pack, ssh): end them all.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = waitDelay
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	return gitRunError(cmd.Run(), stderr.Bytes())
}

// gitRunError joins git's exit error and the end of what it wrote.
func gitRunError(err error, stderr []byte) error {
	if err == nil {
		return nil
	}
	out := strings.TrimSpace(string(stderr))
	if len(out) > 2048 {
		out = "..." + out[len(out)-2048:]
	}
	out = strings.Join(strings.Fields(strings.ReplaceAll(out, "\n", " | ")), " ")
	if out == "" {
		return fmt.Errorf("git: %w", err)
	}
	return fmt.Errorf("git: %s: %w", out, err)
}

// gitEnv is the environment of git: the agent's own (proxies, CA files and
// GIT_SSL_ settings, HOME for ssh) without any other GIT_ variable, which
// could point git elsewhere, and with the settings that make it predictable.
func gitEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if (strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "GIT_SSL_")) ||
			strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG=") || strings.HasPrefix(kv, "SSH_ASKPASS") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"LC_ALL=C",
	)
}

// credentials are what git needs to authenticate, as environment
// variables. Secrets are never in them: they sit in 0600 files of a 0700
// folder, read by an askpass script, so that neither the process list nor
// /proc/<pid>/environ shows them.
type credentials struct {
	env []string
	dir string
}

func (c *credentials) remove() {
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// credentialsPattern names the folders holding one run's credentials in
// the cache; git ignores them.
const credentialsPattern = ".credentials-*"

// removeStaleCredentials removes credential folders a crashed run left.
func (s *Source) removeStaleCredentials() {
	stale, _ := filepath.Glob(filepath.Join(s.cfg.CacheDir, credentialsPattern))
	for _, d := range stale {
		if err := os.RemoveAll(d); err != nil {
			s.log.Warn("cannot remove stale git credentials", "dir", d, "error", err)
		}
	}
}

// askpassScript answers git's "Username for ..." and "Password for ..."
// prompts from the files next to it.
const askpassScript = `#!/bin/sh
d=$(dirname "$0")
case "$1" in
[Uu]sername*) exec cat "$d/username" ;;
*) exec cat "$d/password" ;;
esac
`

// gitCredentials prepares the credentials of one git run.
func (s *Source) gitCredentials() (*credentials, error) {
	a := s.cfg.Auth
	switch s.protocol {
	case "http", "https":
		user, pass := a.Username, a.Password
		if a.Token != "" {
			pass = a.Token
			if user == "" {
				user = tokenUsername
			}
		}
		if user == "" && pass == "" {
			return &credentials{env: []string{"GIT_ASKPASS=/bin/false"}}, nil
		}
		// In the cache rather than a shared temporary folder: a crash
		// leaves the files where the next fetch removes them.
		s.removeStaleCredentials()
		dir, err := os.MkdirTemp(s.cfg.CacheDir, credentialsPattern)
		if err != nil {
			return nil, fmt.Errorf("prepare git credentials: %w", err)
		}
		c := &credentials{dir: dir}
		for name, content := range map[string]string{"username": user, "password": pass} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				c.remove()
				return nil, fmt.Errorf("prepare git credentials: %w", err)
			}
		}
		script := filepath.Join(dir, "askpass")
		if err := os.WriteFile(script, []byte(askpassScript), 0o700); err != nil {
			c.remove()
			return nil, fmt.Errorf("prepare git credentials: %w", err)
		}
		c.env = []string{"GIT_ASKPASS=" + script}
		return c, nil
	case "ssh":
		return &credentials{env: []string{"GIT_SSH_COMMAND=" + s.sshCommand(), "GIT_SSH_VARIANT=ssh"}}, nil
	}
	return &credentials{}, nil
}

// sshCommand runs ssh with the configured key and known_hosts only: host
// keys always checked, no agent, no prompt, bounded by the fetch timeout.
func (s *Source) sshCommand() string {
	a := s.cfg.Auth
	secs := int(s.cfg.Timeout / time.Second)
	if secs < 1 {
		secs = 1
	}
	return strings.Join([]string{
		"ssh",
		"-i", shellQuote(a.SSHKeyFile),
		"-o", "IdentitiesOnly=yes",
		"-o", "IdentityAgent=none",
		"-o", "UserKnownHostsFile=" + shellQuote(a.KnownHostsFile),
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "BatchMode=yes",
		"-o", "ConnectTimeout=" + strconv.Itoa(secs),
	}, " ")
}

// shellQuote quotes s for sh, which runs GIT_SSH_COMMAND.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
