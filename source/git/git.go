// Package git is the Git source: it asks the remote for the head of the
// configured branch, tag, semver range, commit or GitHub pull request,
// fetches it into a persistent bare clone when it changed, and reads the
// manifests at the source path of that commit straight from the object
// store, without a worktree.
//
// The clone lives in Config.CacheDir so that a restarted agent does not
// fetch again what it already has. Fetches are single-ref, forced so that
// rewritten history is followed, shallow the first time and incremental
// after. The git binary fetches when it is installed, go-git otherwise.
package git

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
)

// DefaultBranch is the branch followed when Ref names nothing.
const DefaultBranch = "main"

// DefaultTimeout bounds one Fetch when Config.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// defaultMaxPacks bounds the packs a clone gathers before it starts over.
const defaultMaxPacks = 64

// tokenUsername is the user name sent with a token over HTTP basic auth.
// GitHub requires a non-empty one and documents this value; other forges
// ignore it.
const tokenUsername = "x-access-token"

// Ref says which commit of the repository to follow. PullRequest or
// MergeRequest, when above zero, wins over every other field (setting both
// is refused). Otherwise the first field set,
// in the order Commit, SemVer, Tag, Branch, wins (Flux's precedence); Branch
// also restricts Commit to that branch's history.
type Ref struct {
	// Branch is followed at its head. Default DefaultBranch.
	Branch string
	// Tag is followed wherever it points, annotated or lightweight.
	Tag string
	// SemVer is a range (Masterminds syntax, e.g. ">=1.0.0 <2.0.0"); the
	// highest tag in it is followed. Tags may carry a leading "v".
	SemVer string
	// Commit is a full 40-hex SHA-1 to stay on.
	Commit string
	// PullRequest, when above zero, is the number of a GitHub pull request
	// whose head is followed through the remote's refs/pull/<N>/head, for
	// previews of the pull request. That ref moves with every push to the
	// pull request, force-pushes included, and exists on GitHub only:
	// other forges name theirs differently. Negative numbers are refused.
	PullRequest int
	// MergeRequest, when above zero, is the IID of a GitLab merge request
	// whose head is followed through the remote's
	// refs/merge-requests/<IID>/head, for previews of the merge request.
	// GitLab keeps that ref in the target project, for merge requests from
	// forks too, and moves it with every push. Negative IIDs are refused.
	MergeRequest int
}

// Auth holds resolved credentials. They are never logged nor put in errors.
type Auth struct {
	// Username and Password are HTTP basic credentials.
	Username, Password string
	// Token is sent over HTTP basic auth as the password, with the user
	// name "x-access-token" (GitHub's convention) unless Username is set.
	Token string
	// SSHKeyFile is a private key file for SSH remotes.
	SSHKeyFile string
	// KnownHostsFile lists the accepted SSH host keys. It is required with
	// SSH: host keys are always checked.
	KnownHostsFile string
	// SSHKeyPassphrase decrypts SSHKeyFile when it is encrypted.
	SSHKeyPassphrase string
}

// Config configures a Git source.
type Config struct {
	// Name is the source's name.
	Name string
	// URL is the repository: file://, http://, https://, ssh:// or the
	// scp-like user@host:path. Credentials in an HTTP URL are used when
	// Auth has none, and never shown.
	URL string
	// Ref selects the commit to follow.
	Ref Ref
	// Path is the folder within the repository holding the manifests;
	// "" is the root.
	Path string
	// Auth holds the credentials, if any.
	Auth Auth
	// CacheDir is this source's own persistent folder for its clone.
	CacheDir string
	// Timeout bounds each Fetch; zero means DefaultTimeout.
	Timeout time.Duration
	// Load controls how manifest files are read.
	Load manifest.LoadOptions
	// Logger receives debug and info records; nil discards them.
	Logger *slog.Logger
	// Verify, when set, refuses commits without a good signature by a
	// trusted key: their snapshot carries a problem for each.
	Verify *Verify
}

// strategy is the kind of reference followed, after precedence.
type strategy int

const (
	byBranch strategy = iota
	byTag
	bySemVer
	byCommit
	// byPullRequest follows a GitHub pull request's or a GitLab merge
	// request's head.
	byPullRequest
)

// Source is a Git source. Its methods are safe for concurrent use; fetches
// are serialised because they share the clone.
type Source struct {
	cfg        Config
	transport  string // URL given to go-git: HTTP credentials removed
	location   string // URL for people: all credentials removed
	protocol   string
	auth       transport.AuthMethod
	strategy   strategy
	commit     plumbing.Hash
	constraint *semver.Constraints
	secrets    []string
	maxPacks   int // clone packs beyond which the clone is trimmed
	// maxLoose are the loose objects beyond which the clone is trimmed.
	maxLoose looseCount
	// maxRetained bounds the file contents kept between fetches.
	maxRetained int64
	engine      engine
	gitBin      string // the git binary, for engineGit
	log         *slog.Logger
	// reads counts the blobs read from the object store.
	reads atomic.Int64

	mu sync.Mutex
	// last is what is kept of the last snapshot, with the remote state it
	// came from, so that an unchanged remote costs one ls-remote and a new
	// commit costs what it changed.
	last *index
	// verifyLast is what the signature policy checks of last's commit.
	verifyLast *verifying
	// verdictLogged is the last signature verdict logged: the same head is
	// checked again at every fetch (for rotated keys), and logged only when
	// the verdict changes.
	verdictLogged string
	// clone is the cache kept open between fetches (see openCache).
	clone *clone
	// local is a file:// remote's object store (see localFetch), and
	// localMaxCommits and localMaxEntries the most commits one local fetch
	// copies and tree entries it reads.
	local *localRemote
	// trees are the trees the last local fetch read, by hash: the
	// snapshot of its head and the next fetch read them from here.
	trees map[plumbing.Hash]*object.Tree
	// loose is what the clone holds as loose objects (see looseOver).
	loose           looseCount
	localMaxCommits int
	localMaxEntries int
}

// fullHistory reports whether the clone must hold the whole history: to
// list the commits since the last applied one, or to tell whether a head
// goes back in history.
func (s *Source) fullHistory() bool {
	return s.cfg.Verify != nil && (s.cfg.Verify.Mode == VerifyAll || s.guardsRollback())
}

var _ source.Source = (*Source)(nil)

var hexSHA1 = regexp.MustCompile(`^[0-9a-f]{40}$`)

// New validates cfg and returns the source. It touches neither the network
// nor CacheDir, except to read the SSH key and known_hosts files.
func New(cfg Config) (*Source, error) {
	if cfg.Name == "" {
		return nil, errors.New("git source: name is required")
	}
	s := &Source{cfg: cfg, log: cfg.Logger, maxPacks: defaultMaxPacks, maxRetained: defaultMaxRetained,
		maxLoose:        looseCount{objects: defaultMaxLooseObjects, bytes: defaultMaxLooseBytes},
		localMaxCommits: defaultLocalMaxCommits, localMaxEntries: defaultLocalMaxEntries}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("source", cfg.Name)
	if s.cfg.Timeout <= 0 {
		s.cfg.Timeout = DefaultTimeout
	}
	if cfg.CacheDir == "" {
		return nil, fmt.Errorf("git source %s: cache folder is required", cfg.Name)
	}
	// Resolved now: git runs in the cache folder, where a relative path
	// would mean another folder, and a later change of working directory
	// must not move the cache.
	abs, err := filepath.Abs(cfg.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("git source %s: resolve cache folder: %w", cfg.Name, err)
	}
	s.cfg.CacheDir = abs
	p, err := cleanPath(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("git source %s: %w", cfg.Name, err)
	}
	s.cfg.Path = p
	if err := s.parseRef(); err != nil {
		return nil, fmt.Errorf("git source %s: %w", cfg.Name, err)
	}
	if err := s.parseURL(); err != nil {
		return nil, fmt.Errorf("git source %s: %w", cfg.Name, err)
	}
	if err := s.buildAuth(); err != nil {
		return nil, fmt.Errorf("git source %s: %w", cfg.Name, err)
	}
	if cfg.Verify != nil {
		v := *cfg.Verify
		s.cfg.Verify = &v
		switch {
		case v.Verifier == nil:
			return nil, fmt.Errorf("git source %s: verify: no trusted keys", cfg.Name)
		case v.Mode == "":
			s.cfg.Verify.Mode = VerifyHead
		case v.Mode != VerifyHead && v.Mode != VerifyAll:
			return nil, fmt.Errorf("git source %s: verify: mode %q is not %s or %s", cfg.Name, v.Mode, VerifyHead, VerifyAll)
		}
		switch v.Rollback {
		case "":
			s.cfg.Verify.Rollback = RollbackRefuse
		case RollbackRefuse, RollbackAllow:
		default:
			return nil, fmt.Errorf("git source %s: verify: rollback %q is not %s or %s", cfg.Name, v.Rollback, RollbackRefuse, RollbackAllow)
		}
	}
	s.chooseEngine()
	return s, nil
}

// Name returns the source's configured name.
func (s *Source) Name() string { return s.cfg.Name }

// Kind returns source.KindGit.
func (s *Source) Kind() string { return source.KindGit }

// Location returns the repository URL without credentials.
func (s *Source) Location() string { return s.location }

// Path returns the folder within the repository that holds the manifests.
func (s *Source) Path() string { return s.cfg.Path }

// cleanPath checks that p stays inside the repository and gives it one
// spelling, so that "./a/" and "a" share status and errors.
func cleanPath(p string) (string, error) {
	p = strings.ReplaceAll(p, "\\", "/")
	if p == "" {
		return "", nil
	}
	if path.IsAbs(p) {
		return "", fmt.Errorf("path %q must be relative to the repository root", p)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q leaves the repository", p)
	}
	if c == "." {
		return "", nil
	}
	if c == ".git" || strings.HasPrefix(c, ".git/") {
		return "", fmt.Errorf("path %q is inside the .git folder", p)
	}
	return c, nil
}

// parseRef applies Flux's precedence and checks what can be checked offline.
func (s *Source) parseRef() error {
	r := &s.cfg.Ref
	if r.PullRequest < 0 {
		return fmt.Errorf("pull request number %d must be positive", r.PullRequest)
	}
	if r.MergeRequest < 0 {
		return fmt.Errorf("merge request IID %d must be positive", r.MergeRequest)
	}
	switch {
	case r.PullRequest > 0 && r.MergeRequest > 0:
		return fmt.Errorf("pull request %d and merge request %d: follow one", r.PullRequest, r.MergeRequest)
	case r.PullRequest > 0, r.MergeRequest > 0:
		s.strategy = byPullRequest
	case r.Commit != "":
		c := strings.ToLower(r.Commit)
		if !hexSHA1.MatchString(c) {
			return fmt.Errorf("commit %q is not a full 40-hex SHA-1", r.Commit)
		}
		r.Commit = c
		s.commit = plumbing.NewHash(c)
		s.strategy = byCommit
	case r.SemVer != "":
		c, err := semver.NewConstraint(r.SemVer)
		if err != nil {
			return fmt.Errorf("semver range %q: %w", r.SemVer, err)
		}
		s.constraint = c
		s.strategy = bySemVer
	case r.Tag != "":
		if err := checkRefName("tag", r.Tag); err != nil {
			return err
		}
		s.strategy = byTag
	default:
		if r.Branch == "" {
			r.Branch = DefaultBranch
		}
		s.strategy = byBranch
	}
	if r.Branch != "" {
		if err := checkRefName("branch", r.Branch); err != nil {
			return err
		}
	}
	return nil
}

// checkRefName refuses names that would change the meaning of a refspec.
func checkRefName(kind, name string) error {
	if strings.ContainsAny(name, "*:^~?[\\ \t\n") || strings.HasPrefix(name, "-") ||
		strings.HasPrefix(name, "refs/") || strings.Contains(name, "..") {
		return fmt.Errorf("invalid %s name %q", kind, name)
	}
	return nil
}

// parseURL checks the scheme and splits the URL into what go-git dials and
// what people see. Parse errors do not repeat the URL, which may hold a
// password.
func (s *Source) parseURL() error {
	raw := s.cfg.URL
	if raw == "" {
		return errors.New("url is required")
	}
	if !strings.Contains(raw, "://") {
		ep, err := transport.NewEndpoint(raw)
		if err != nil || ep.Protocol != "ssh" {
			return errors.New("url must be file://, http://, https://, ssh:// or user@host:path")
		}
		// scp-like: only a user name may precede the host.
		s.protocol = "ssh"
		s.transport = raw
		s.location = raw
		if ep.Password != "" {
			return errors.New("url must not hold an SSH password: use an SSH key")
		}
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("url cannot be parsed")
	}
	switch u.Scheme {
	case "file", "http", "https", "ssh":
	default:
		return fmt.Errorf("url scheme %q is not supported: use file, http, https or ssh", u.Scheme)
	}
	s.protocol = u.Scheme
	if u.Scheme != "file" && u.Host == "" {
		return errors.New("url has no host")
	}
	if u.Scheme == "file" && u.Path == "" {
		return errors.New("file url has no path")
	}
	if u.User != nil {
		pass, hasPass := u.User.Password()
		switch u.Scheme {
		case "http", "https":
			// Credentials move from the URL to Auth so that no library
			// error can print them with the URL.
			if s.cfg.Auth.Username == "" && s.cfg.Auth.Password == "" && s.cfg.Auth.Token == "" {
				s.cfg.Auth.Username = u.User.Username()
				s.cfg.Auth.Password = pass
				if !hasPass && len(s.cfg.Auth.Username) >= 3 {
					// https://TOKEN@host: the user name is the secret.
					s.secrets = append(s.secrets, s.cfg.Auth.Username)
				}
			}
			u.User = nil
		case "ssh":
			if hasPass {
				return errors.New("url must not hold an SSH password: use an SSH key")
			}
		default:
			u.User = nil
		}
	}
	s.transport = u.String()
	s.location = s.transport
	return nil
}

// buildAuth turns Auth into a go-git auth method for the URL's protocol and
// refuses combinations that would silently ignore a credential.
func (s *Source) buildAuth() error {
	a := s.cfg.Auth
	for _, v := range []string{a.Password, a.Token, a.SSHKeyPassphrase} {
		if len(v) >= 3 {
			s.secrets = append(s.secrets, v)
		}
	}
	hasHTTP := a.Username != "" || a.Password != "" || a.Token != ""
	hasSSH := a.SSHKeyFile != "" || a.KnownHostsFile != "" || a.SSHKeyPassphrase != ""
	switch s.protocol {
	case "file":
		if hasHTTP || hasSSH {
			return errors.New("credentials are not used with file:// urls")
		}
		return nil
	case "http", "https":
		if hasSSH {
			return errors.New("ssh key and known_hosts are not used with http(s) urls")
		}
		switch {
		case a.Token != "" && a.Password != "":
			return errors.New("set either a token or a password, not both")
		case a.Token != "":
			user := a.Username
			if user == "" {
				user = tokenUsername
			}
			s.auth = &githttp.BasicAuth{Username: user, Password: a.Token}
		case a.Username != "" || a.Password != "":
			s.auth = &githttp.BasicAuth{Username: a.Username, Password: a.Password}
		}
		return nil
	}
	// ssh
	if hasHTTP {
		return errors.New("username, password and token are not used with ssh urls: use an SSH key")
	}
	if a.SSHKeyFile == "" {
		return errors.New("ssh url needs an SSH key file")
	}
	if a.KnownHostsFile == "" {
		return errors.New("ssh url needs a known_hosts file: host keys are always checked")
	}
	ep, err := transport.NewEndpoint(s.transport)
	if err != nil {
		return errors.New("url cannot be parsed")
	}
	user := ep.User
	if user == "" {
		user = "git"
	}
	keys, err := gitssh.NewPublicKeysFromFile(user, a.SSHKeyFile, a.SSHKeyPassphrase)
	if err != nil {
		return fmt.Errorf("read SSH key file %s: %w", a.SSHKeyFile, s.redact(err))
	}
	// go-git skips missing known_hosts files and then complains about
	// none in general; naming the configured file is more useful.
	if _, err := os.Stat(a.KnownHostsFile); err != nil {
		return fmt.Errorf("known_hosts file %s: %w", a.KnownHostsFile, err)
	}
	db, err := gitssh.NewKnownHostsDb(a.KnownHostsFile)
	if err != nil {
		return fmt.Errorf("read known_hosts file %s: %w", a.KnownHostsFile, err)
	}
	port := ep.Port
	if port == 0 {
		port = 22
	}
	keys.HostKeyCallback = db.HostKeyCallback()
	// Offer only the host key types known_hosts holds for this host, or the
	// server may present another type and fail verification.
	keys.HostKeyAlgorithms = db.HostKeyAlgorithms(net.JoinHostPort(ep.Host, fmt.Sprint(port)))
	s.auth = &sshKeys{PublicKeys: keys, timeout: s.cfg.Timeout}
	return nil
}

// sshKeys bounds the SSH connection by the fetch timeout: go-git dials SSH
// without the request's context, so the deadline has to come from the
// client configuration.
type sshKeys struct {
	*gitssh.PublicKeys
	timeout time.Duration
}

// ClientConfig returns the key's SSH client configuration with the dial
// timeout set.
func (k *sshKeys) ClientConfig() (*ssh.ClientConfig, error) {
	cfg, err := k.PublicKeys.ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = k.timeout
	return cfg, nil
}

// redact removes secret values from an error's text, keeping the chain for
// errors.Is. Libraries are not expected to print them; this is the belt to
// their braces.
func (s *Source) redact(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	red := msg
	for _, v := range s.secrets {
		red = strings.ReplaceAll(red, v, "***")
	}
	if red == msg {
		return err
	}
	return &redactedError{msg: red, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
