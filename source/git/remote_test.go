package git

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git/gittest"
)

// httpRepo serves a fresh repository over HTTP with basic auth user:pass
// and returns it with its URL.
func httpRepo(t *testing.T) (*gittest.Repo, *gittest.Server, string) {
	t.Helper()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	r.Commit("first")
	gs := gittest.NewServer(t, filepath.Dir(r.Dir), "user", "s3cret-pass")
	return r, gs, gs.URL + "/repo/.git"
}

func isUploadPack(req string) bool {
	return strings.HasPrefix(req, "POST ") && strings.HasSuffix(req, "/git-upload-pack")
}

func TestHTTPUnchangedHeadOnlyListsRefs(t *testing.T) {
	t.Parallel()
	r, gs, url := httpRepo(t)
	s := newSource(t, url, func(c *Config) { c.Auth = Auth{Username: "user", Password: "s3cret-pass"} })

	snap := fetch(t, s)
	if want := manifest.Revision("main@sha1:" + r.Head()); snap.Revision != want {
		t.Fatalf("revision = %s, want %s", snap.Revision, want)
	}
	if reqs := gs.Take(); !slices.ContainsFunc(reqs, isUploadPack) {
		t.Fatalf("first fetch did not fetch: %v", reqs)
	}

	again := fetch(t, s)
	if again.Revision != snap.Revision {
		t.Fatalf("revision = %s, want %s", again.Revision, snap.Revision)
	}
	want := []string{"GET /repo/.git/info/refs?service=git-upload-pack"}
	if reqs := gs.Take(); !slices.Equal(reqs, want) {
		t.Fatalf("unchanged head: requests %v, want only %v", reqs, want)
	}

	// A new source on the same cache, as after a restart, fetches nothing.
	restarted := newSource(t, url, func(c *Config) {
		c.Auth = Auth{Username: "user", Password: "s3cret-pass"}
		c.CacheDir = s.cfg.CacheDir
	})
	snap2 := fetch(t, restarted)
	if snap2.Revision != snap.Revision {
		t.Fatalf("restarted revision = %s, want %s", snap2.Revision, snap.Revision)
	}
	assertContents(t, snap2, map[string]string{"a.yaml": "a: 1\n"})
	if reqs := gs.Take(); !slices.Equal(reqs, want) {
		t.Fatalf("restart with unchanged head: requests %v, want only %v", reqs, want)
	}

	// A change is fetched.
	r.Write(map[string]string{"a.yaml": "a: 2\n"})
	head := r.Commit("second")
	snap = fetch(t, restarted)
	if want := manifest.Revision("main@sha1:" + head); snap.Revision != want {
		t.Fatalf("revision = %s, want %s", snap.Revision, want)
	}
	assertContents(t, snap, map[string]string{"a.yaml": "a: 2\n"})
	if reqs := gs.Take(); !slices.ContainsFunc(reqs, isUploadPack) {
		t.Fatalf("changed head was not fetched: %v", reqs)
	}
}

func TestHTTPAuth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		auth   Auth
		inURL  string
		server [2]string
		ok     bool
	}{
		{"basic", Auth{Username: "user", Password: "s3cret-pass"}, "", [2]string{"user", "s3cret-pass"}, true},
		{"token", Auth{Token: "tok-123456"}, "", [2]string{"x-access-token", "tok-123456"}, true},
		{"token with username", Auth{Username: "bot", Token: "tok-123456"}, "", [2]string{"bot", "tok-123456"}, true},
		{"credentials in url", Auth{}, "user:s3cret-pass@", [2]string{"user", "s3cret-pass"}, true},
		{"wrong password", Auth{Username: "user", Password: "wrong-pass"}, "", [2]string{"user", "s3cret-pass"}, false},
		{"no credentials", Auth{}, "", [2]string{"user", "s3cret-pass"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := gittest.NewRepo(t)
			r.Write(map[string]string{"a.yaml": "a: 1\n"})
			r.Commit("first")
			gs := gittest.NewServer(t, filepath.Dir(r.Dir), tc.server[0], tc.server[1])
			url := strings.Replace(gs.URL, "://", "://"+tc.inURL, 1) + "/repo/.git"
			s := newSource(t, url, func(c *Config) { c.Auth = tc.auth })
			if strings.Contains(s.Location(), "@") {
				t.Fatalf("location %q shows credentials", s.Location())
			}
			snap, err := s.Fetch(context.Background())
			if tc.ok {
				if err != nil {
					t.Fatalf("Fetch: %v", err)
				}
				assertContents(t, snap, map[string]string{"a.yaml": "a: 1\n"})
				return
			}
			if !errors.Is(err, source.ErrAuth) || errors.Is(err, source.ErrNotFound) {
				t.Fatalf("err = %v, want ErrAuth only", err)
			}
			if !strings.Contains(err.Error(), "list refs of "+gs.URL) {
				t.Fatalf("err = %q, want it to say what failed", err)
			}
			for _, secret := range []string{"s3cret", "wrong-pass"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("err = %q shows a credential", err)
				}
			}
		})
	}
}

func TestHTTPWrongPasswordLeavesCache(t *testing.T) {
	t.Parallel()
	r, gs, url := httpRepo(t)
	good := newSource(t, url, func(c *Config) { c.Auth = Auth{Username: "user", Password: "s3cret-pass"} })
	first := fetch(t, good)
	before := dirDigest(t, good.cfg.CacheDir)

	r.Write(map[string]string{"a.yaml": "a: 2\n"})
	r.Commit("second")
	bad := newSource(t, url, func(c *Config) {
		c.Auth = Auth{Username: "user", Password: "wrong-pass"}
		c.CacheDir = good.cfg.CacheDir
	})
	gs.Take()
	if _, err := bad.Fetch(context.Background()); !errors.Is(err, source.ErrAuth) {
		t.Fatalf("err = %v, want ErrAuth", err)
	}
	if reqs := gs.Take(); slices.ContainsFunc(reqs, isUploadPack) {
		t.Fatalf("a refused ls-remote went on to fetch: %v", reqs)
	}
	if dirDigest(t, good.cfg.CacheDir) != before {
		t.Fatal("a refused fetch changed the cache")
	}
	// The good source still has its snapshot and moves on.
	if snap := fetch(t, good); snap.Revision == first.Revision {
		t.Fatal("the good source did not see the new commit")
	}
}

func TestUnreachableRemote(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more
	url := "http://" + addr + "/repo.git"
	s := newSource(t, url, func(c *Config) { c.Timeout = 5 * time.Second })
	_, err = s.Fetch(context.Background())
	if err == nil {
		t.Fatal("Fetch of a closed port succeeded")
	}
	if errors.Is(err, source.ErrNotFound) || errors.Is(err, source.ErrAuth) {
		t.Fatalf("err = %v, want neither ErrNotFound nor ErrAuth", err)
	}
	t.Log(err)
	if !strings.HasPrefix(err.Error(), "list refs of "+url+": ") {
		t.Fatalf("err = %q, want it to say what failed", err)
	}
}

func TestSilentRemoteTimesOut(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Accept connections and never answer; everything closes at cleanup.
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})

	s := newSource(t, "http://"+l.Addr().String()+"/repo.git", func(c *Config) { c.Timeout = 300 * time.Millisecond })
	_, err = s.Fetch(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "list refs of http://") {
		t.Fatalf("err = %q, want it to say what failed", err)
	}
}

func TestFetchHonoursCancel(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	r.Commit("first")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newSource(t, r.URL(), nil).Fetch(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// sshFiles writes an unencrypted ed25519 key and a known_hosts file for
// host and returns their paths.
func sshFiles(t *testing.T, host string) (keyFile, knownHostsFile string) {
	t.Helper()
	dir := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile = filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	hostPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(hostPub)
	if err != nil {
		t.Fatal(err)
	}
	knownHostsFile = filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{host}, pub) + "\n"
	if err := os.WriteFile(knownHostsFile, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return keyFile, knownHostsFile
}

func TestSSHAuth(t *testing.T) {
	t.Parallel()
	keyFile, knownHosts := sshFiles(t, "git.example.com")
	missing := filepath.Join(t.TempDir(), "no_known_hosts")
	tests := []struct {
		name    string
		url     string
		auth    Auth
		user    string
		mention string // "" when New must succeed
	}{
		{"ssh url", "ssh://deploy@git.example.com/acme/infra.git", Auth{SSHKeyFile: keyFile, KnownHostsFile: knownHosts}, "deploy", ""},
		{"scp-like url", "git@git.example.com:acme/infra.git", Auth{SSHKeyFile: keyFile, KnownHostsFile: knownHosts}, "git", ""},
		{"no user", "ssh://git.example.com/acme/infra.git", Auth{SSHKeyFile: keyFile, KnownHostsFile: knownHosts}, "git", ""},
		{"missing known_hosts file", "ssh://git@git.example.com/acme/infra.git", Auth{SSHKeyFile: keyFile, KnownHostsFile: missing}, "", missing},
		{"no known_hosts", "ssh://git@git.example.com/acme/infra.git", Auth{SSHKeyFile: keyFile}, "", "known_hosts"},
		{"no key", "ssh://git@git.example.com/acme/infra.git", Auth{KnownHostsFile: knownHosts}, "", "SSH key"},
		{"missing key file", "ssh://git@git.example.com/acme/infra.git", Auth{SSHKeyFile: missing + "_key", KnownHostsFile: knownHosts}, "", missing + "_key"},
		{"token over ssh", "ssh://git@git.example.com/acme/infra.git", Auth{Token: "abc", SSHKeyFile: keyFile, KnownHostsFile: knownHosts}, "", "token"},
		{"password in url", "ssh://git:pw@git.example.com/acme/infra.git", Auth{SSHKeyFile: keyFile, KnownHostsFile: knownHosts}, "", "password"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(Config{Name: "ssh", URL: tc.url, CacheDir: t.TempDir(), Auth: tc.auth})
			if tc.mention != "" {
				if err == nil || !strings.Contains(err.Error(), tc.mention) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.mention)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			wrapped, ok := s.auth.(*sshKeys)
			if !ok {
				t.Fatalf("auth = %T, want *sshKeys", s.auth)
			}
			var _ gitssh.AuthMethod = wrapped // what go-git's SSH transport requires
			keys := wrapped.PublicKeys
			cfg, err := wrapped.ClientConfig()
			if err != nil {
				t.Fatalf("ClientConfig: %v", err)
			}
			if cfg.Timeout != DefaultTimeout || cfg.HostKeyCallback == nil {
				t.Fatalf("client config: timeout %v, host key callback set %v", cfg.Timeout, cfg.HostKeyCallback != nil)
			}
			if keys.User != tc.user || keys.HostKeyCallback == nil || len(keys.HostKeyAlgorithms) == 0 {
				t.Fatalf("auth: user %q, callback set %v, algorithms %v", keys.User, keys.HostKeyCallback != nil, keys.HostKeyAlgorithms)
			}
			if s.Location() != tc.url {
				t.Fatalf("location = %q, want %q", s.Location(), tc.url)
			}
		})
	}
}

func TestSSHUnknownHostRefused(t *testing.T) {
	t.Parallel()
	// A local SSH-speaking listener whose host key is not in known_hosts:
	// the handshake must fail on the host key, before any credential use.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	srvCfg := &ssh.ServerConfig{NoClientAuth: true}
	srvCfg.AddHostKey(signer)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _, _, _ = ssh.NewServerConn(c, srvCfg)
	}()
	t.Cleanup(func() { l.Close(); wg.Wait() })

	host, port, _ := net.SplitHostPort(l.Addr().String())
	keyFile, knownHosts := sshFiles(t, "["+host+"]:"+port) // a different key for this host
	s, err := New(Config{Name: "ssh", URL: "ssh://git@" + l.Addr().String() + "/repo.git", CacheDir: t.TempDir(),
		Auth: Auth{SSHKeyFile: keyFile, KnownHostsFile: knownHosts}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = s.Fetch(context.Background())
	if err == nil || errors.Is(err, source.ErrNotFound) {
		t.Fatalf("err = %v, want a host key error", err)
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "list refs of ssh://git@"+l.Addr().String()) {
		t.Fatalf("err = %q, want it to say what failed", err)
	}
}
