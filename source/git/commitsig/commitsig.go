package commitsig

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Config names the files of trusted keys. At least one must be set; a
// commit signed in a format whose file is not set does not verify.
type Config struct {
	// OpenPGPKeysFile holds ASCII-armored OpenPGP public keys.
	OpenPGPKeysFile string
	// SSHAllowedSignersFile holds SSH public keys in ssh-keygen's allowed
	// signers format.
	SSHAllowedSignersFile string
}

// Check reports whether the configuration names at least one key file.
func (c Config) Check() error {
	if c.OpenPGPKeysFile == "" && c.SSHAllowedSignersFile == "" {
		return errors.New("commit verification needs openpgpKeysFile or sshAllowedSignersFile")
	}
	return nil
}

// Kind is the format of a commit signature.
type Kind string

const (
	// KindOpenPGP is an OpenPGP signature, as gpg makes.
	KindOpenPGP Kind = "openpgp"
	// KindSSH is an SSHSIG signature, as ssh-keygen -Y sign makes.
	KindSSH Kind = "ssh"
)

// Signer is the trusted key that made a commit's signature.
type Signer struct {
	// Kind is the signature format.
	Kind Kind
	// Fingerprint identifies the trusted key: for OpenPGP the primary key's
	// fingerprint in upper-case hex, for SSH "SHA256:" and the unpadded
	// base64 digest, as ssh-keygen -l prints it.
	Fingerprint string
	// KeyID is, for OpenPGP, the 16 upper-case hex digits of the key ID of
	// the key that signed, which is a subkey's when a subkey signed. It is
	// empty for SSH.
	KeyID string
	// Identity is, for OpenPGP, the key's primary user ID ("Name
	// <email>"), and for SSH the principals field of the allowed signers
	// line that trusted the key.
	Identity string
}

// Errors that UnverifiedError wraps, to classify the failure with errors.Is.
var (
	// ErrNotSigned is a commit without a signature.
	ErrNotSigned = errors.New("commit is not signed")
	// ErrUntrusted is a commit signed by a key that is not trusted, or not
	// for this commit: unknown, expired, revoked, outside its validity or
	// limited to other namespaces.
	ErrUntrusted = errors.New("commit is signed by a key that is not trusted")
	// ErrBadSignature is a signature that does not verify: malformed, made
	// over other content, for another namespace or in an unknown format.
	ErrBadSignature = errors.New("commit signature is bad")
	// ErrNotConfigured is a signature in a format for which no key file is
	// configured.
	ErrNotConfigured = errors.New("no trusted keys are configured for the commit's signature format")
)

// UnverifiedError is a commit whose signature could not be verified.
type UnverifiedError struct {
	// Commit is the commit's full hash.
	Commit string
	// Key identifies the signing key when the signature names it: an SSH
	// SHA256 fingerprint, or an OpenPGP fingerprint (the primary key's when
	// the key is in the keyring, else the signing key's) or, when the
	// signature names no fingerprint, its key ID. Empty otherwise.
	Key string
	// Reason says why, for people.
	Reason string
	// Err is ErrNotSigned, ErrUntrusted, ErrBadSignature or
	// ErrNotConfigured.
	Err error
}

// Error says which commit failed and why.
func (e *UnverifiedError) Error() string {
	return "commit " + shortHash(e.Commit) + ": " + e.Reason
}

// Unwrap gives the class of the failure.
func (e *UnverifiedError) Unwrap() error { return e.Err }

// FileError is a key file that could not be read or parsed.
type FileError struct {
	// Path is the file as configured.
	Path string
	// Line is the 1-based line at fault, or 0 when the whole file is.
	Line int
	// Err is the fault.
	Err error
}

// Error names the file and line, as compilers do.
func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

// Unwrap gives the fault.
func (e *FileError) Unwrap() error { return e.Err }

// Verifier checks commit signatures against the configured key files,
// reloading them when they change. It is safe for concurrent use.
type Verifier struct {
	openpgp *keyFile[*openpgpKeys]
	ssh     *keyFile[*allowedSigners]
}

// New reads the configured key files and returns a Verifier over them.
func New(cfg Config) (*Verifier, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	v := &Verifier{}
	if cfg.OpenPGPKeysFile != "" {
		v.openpgp = newKeyFile(cfg.OpenPGPKeysFile, parseOpenPGPKeys)
		if _, err := v.openpgp.get(); err != nil {
			return nil, err
		}
	}
	if cfg.SSHAllowedSignersFile != "" {
		v.ssh = newKeyFile(cfg.SSHAllowedSignersFile, parseAllowedSigners)
		if _, err := v.ssh.get(); err != nil {
			return nil, err
		}
	}
	return v, nil
}

const (
	pgpSignatureBegin = "-----BEGIN PGP SIGNATURE-----"
	sshSignatureBegin = "-----BEGIN SSH SIGNATURE-----"
)

// Verify returns the trusted key that signed c. A commit that is unsigned
// or whose signature does not verify against a trusted key gives an
// *UnverifiedError; a key file that cannot be read or parsed gives a
// *FileError.
func (v *Verifier) Verify(c *object.Commit) (*Signer, error) {
	commit := c.Hash.String()
	sig := c.PGPSignature
	if strings.TrimSpace(sig) == "" {
		return nil, &UnverifiedError{Commit: commit, Reason: "not signed", Err: ErrNotSigned}
	}
	// git refuses a commit whose signature header holds more than one
	// signature, as it cannot say which one speaks for the commit.
	if n := strings.Count(sig, "-----BEGIN "); n > 1 {
		return nil, &UnverifiedError{Commit: commit, Reason: fmt.Sprintf("bad signature: it holds %d signatures, not one", n), Err: ErrBadSignature}
	}
	payload, err := signedPayload(c)
	if err != nil {
		return nil, fmt.Errorf("commit %s: signed payload: %w", shortHash(commit), err)
	}
	switch strings.TrimSpace(sig[:strings.IndexByte(sig+"\n", '\n')]) {
	case pgpSignatureBegin:
		if v.openpgp == nil {
			return nil, &UnverifiedError{Commit: commit, Reason: "signed with OpenPGP but no openpgpKeysFile is configured", Err: ErrNotConfigured}
		}
		keys, err := v.openpgp.get()
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", shortHash(commit), err)
		}
		return keys.verify(commit, payload, sig)
	case sshSignatureBegin:
		if v.ssh == nil {
			return nil, &UnverifiedError{Commit: commit, Reason: "signed with SSH but no sshAllowedSignersFile is configured", Err: ErrNotConfigured}
		}
		signers, err := v.ssh.get()
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", shortHash(commit), err)
		}
		return signers.verify(commit, payload, sig, c.Committer.When)
	default:
		return nil, &UnverifiedError{Commit: commit, Reason: "bad signature: neither OpenPGP nor SSH", Err: ErrBadSignature}
	}
}

// signedPayload is the commit as git signed it: the raw object without its
// signature headers.
func signedPayload(c *object.Commit) ([]byte, error) {
	var o plumbing.MemoryObject
	if err := c.EncodeWithoutSignature(&o); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	r, err := o.Reader()
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return b, nil
}

// shortHash abbreviates a commit hash for messages, as git log --oneline
// does; the full hash stays in UnverifiedError.Commit.
func shortHash(h string) string {
	if len(h) > 8 {
		return h[:8]
	}
	return h
}
