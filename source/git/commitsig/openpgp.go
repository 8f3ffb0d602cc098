package commitsig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

const (
	pgpKeyBlockBegin = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
	pgpKeyBlockEnd   = "-----END PGP PUBLIC KEY BLOCK-----"
)

// openpgpKeys is a parsed OpenPGP keys file.
type openpgpKeys struct {
	keyring openpgp.EntityList
}

// parseOpenPGPKeys reads the armored public key blocks of a keys file.
// Each block is parsed on its own so that a fault names its first line,
// and so that concatenated exports (cat a.asc b.asc) work, which a single
// armor decode would stop short of.
func parseOpenPGPKeys(path string, data []byte) (*openpgpKeys, error) {
	lines := splitLines(data)
	keys := &openpgpKeys{}
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line != pgpKeyBlockBegin {
			return nil, &FileError{Path: path, Line: i + 1, Err: fmt.Errorf("expected %s (an armored public key, as gpg --export --armor writes)", pgpKeyBlockBegin)}
		}
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != pgpKeyBlockEnd {
			end++
		}
		if end == len(lines) {
			return nil, &FileError{Path: path, Line: i + 1, Err: fmt.Errorf("public key block has no %s line", pgpKeyBlockEnd)}
		}
		block := strings.Join(lines[i:end+1], "\n") + "\n"
		entities, err := openpgp.ReadArmoredKeyRing(strings.NewReader(block))
		if err != nil {
			return nil, &FileError{Path: path, Line: i + 1, Err: fmt.Errorf("public key block: %w", err)}
		}
		if len(entities) == 0 {
			return nil, &FileError{Path: path, Line: i + 1, Err: errors.New("public key block holds no usable key")}
		}
		keys.keyring = append(keys.keyring, entities...)
		i = end
	}
	return keys, nil
}

// verify checks an armored OpenPGP signature over payload.
func (k *openpgpKeys) verify(commit string, payload []byte, armored string) (*Signer, error) {
	bad := func(key, why string) error {
		reason := "bad signature: " + why
		if key != "" {
			reason = "bad signature by key " + key + ": " + why
		}
		return &UnverifiedError{Commit: commit, Key: key, Reason: reason, Err: ErrBadSignature}
	}
	block, err := armor.Decode(strings.NewReader(armored))
	if err != nil {
		return nil, bad("", fmt.Sprintf("cannot decode OpenPGP armor: %v", err))
	}
	if block.Type != openpgp.SignatureType {
		return nil, bad("", fmt.Sprintf("armor holds %q, not %q", block.Type, openpgp.SignatureType))
	}
	// Reading to the end also checks the armor's checksum.
	body, err := io.ReadAll(block.Body)
	if err != nil {
		return nil, bad("", fmt.Sprintf("cannot decode OpenPGP armor: %v", err))
	}
	issuer, sigType, err := signatureIssuer(body)
	if err != nil {
		return nil, bad("", err.Error())
	}
	// A text signature (gpg --textmode) covers the commit with its line
	// endings made CRLF, so that a copy with other line endings in its
	// message verifies too: a commit no one signed. git makes binary ones.
	if sigType != packet.SigTypeBinary {
		return nil, bad(issuer, fmt.Sprintf("a text-mode or other non-binary signature (type %#02x): git signs commits in binary mode", uint8(sigType)))
	}

	// A nil config checks expiry and revocation against the current time.
	sig, entity, err := openpgp.VerifyDetachedSignature(k.keyring, bytes.NewReader(payload), bytes.NewReader(body), nil)
	key := issuer
	if entity != nil {
		key = fingerprintHex(entity.PrimaryKey.Fingerprint)
	}
	switch {
	case err == nil:
	case errors.Is(err, pgperrors.ErrUnknownIssuer):
		return nil, &UnverifiedError{Commit: commit, Key: key, Reason: "signed by " + key + " which is not trusted", Err: ErrUntrusted}
	case errors.Is(err, pgperrors.ErrKeyRevoked):
		return nil, &UnverifiedError{Commit: commit, Key: key, Reason: "signed by " + key + " which is revoked", Err: ErrUntrusted}
	case errors.Is(err, pgperrors.ErrKeyExpired):
		return nil, &UnverifiedError{Commit: commit, Key: key, Reason: "signed by " + key + " which has expired", Err: ErrUntrusted}
	case errors.Is(err, pgperrors.ErrSignatureExpired):
		return nil, &UnverifiedError{Commit: commit, Key: key, Reason: "signed by " + key + " with a signature or key binding that has expired", Err: ErrUntrusted}
	default:
		return nil, bad(key, err.Error())
	}
	s := &Signer{Kind: KindOpenPGP, Fingerprint: key}
	if sig.IssuerKeyId != nil {
		s.KeyID = fmt.Sprintf("%016X", *sig.IssuerKeyId)
	}
	if id := entity.PrimaryIdentity(); id != nil {
		s.Identity = id.Name
	}
	return s, nil
}

// signatureIssuer reads the one signature packet of a detached signature
// and says which key made it, so that an untrusted signer can be named,
// and its type.
func signatureIssuer(body []byte) (string, packet.SignatureType, error) {
	r := packet.NewReader(bytes.NewReader(body))
	p, err := r.Next()
	if err != nil {
		return "", 0, fmt.Errorf("cannot read OpenPGP signature: %w", err)
	}
	sig, ok := p.(*packet.Signature)
	if !ok {
		return "", 0, fmt.Errorf("OpenPGP packet is a %T, not a signature", p)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		return "", 0, errors.New("OpenPGP signature holds more than one packet")
	}
	switch {
	case len(sig.IssuerFingerprint) > 0:
		return fingerprintHex(sig.IssuerFingerprint), sig.SigType, nil
	case sig.IssuerKeyId != nil:
		return fmt.Sprintf("%016X", *sig.IssuerKeyId), sig.SigType, nil
	}
	return "", 0, errors.New("OpenPGP signature names no issuer")
}

func fingerprintHex(fp []byte) string {
	return fmt.Sprintf("%X", fp)
}
