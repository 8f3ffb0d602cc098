package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	gosync "sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// sigErrKey carries, in a verification's context, where keySet reports
// why it refused the token.
type sigErrKey struct{}

// maxKeySetBytes caps the issuer's key set as read.
const maxKeySetBytes = 1 << 20

// keySet is the issuer's published keys, cached. It replaces go-oidc's
// RemoteKeySet, which reads the keys again for every token whose key ID it
// does not know: anyone can make such a token, so a flood of them would
// make the agent flood the issuer. Here, a key ID the cache does not have
// reads the keys again only when the last read is at least floor ago;
// otherwise the token is refused as signed by an unknown key when that
// read succeeded, and as unavailable when it failed (the issuer is down,
// and the key may be a new one). One read runs at a time; the others wait
// for it.
type keySet struct {
	url    string
	client *http.Client
	floor  time.Duration
	maxAge time.Duration

	mu        gosync.Mutex
	keys      []jose.JSONWebKey
	fetchedAt time.Time // of keys
	triedAt   time.Time // of the last read, whatever its outcome
	lastErr   error     // of the last read
	reading   chan struct{}
}

// Errors of keySet that wrap ErrInvalid; none names a URL.
var (
	errUnknownKey = fmt.Errorf("%w: signed with a key the issuer does not publish", ErrInvalid)
	errSignature  = fmt.Errorf("%w: the signature does not match the issuer's key", ErrInvalid)
)

// VerifySignature implements go-oidc's KeySet. It reports its error in the
// context too (see Verifier.Name).
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	payload, err := k.verify(ctx, raw)
	if p, ok := ctx.Value(sigErrKey{}).(*error); ok && err != nil {
		*p = err
	}
	return payload, err
}

func (k *keySet) verify(ctx context.Context, raw string) ([]byte, error) {
	// go-oidc checked the algorithm against the issuer's before calling.
	jws, err := jose.ParseSigned(raw, allAlgs)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed: %v", ErrInvalid, err)
	}
	if len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("%w: %d signatures, want one", ErrInvalid, len(jws.Signatures))
	}
	kid := jws.Signatures[0].Header.KeyID

	keys, stale := k.cached()
	if stale {
		// Old keys are read again; while the issuer does not answer, they
		// are still used.
		if err := k.refresh(ctx); err == nil {
			keys, _ = k.cached()
		}
	}
	payload, known, err := verifyWith(jws, keys, kid)
	if err == nil || known {
		return payload, err
	}
	// A key this cache does not have: maybe the issuer's new one.
	if err := k.refresh(ctx); err != nil {
		return nil, err
	}
	keys, _ = k.cached()
	payload, known, err = verifyWith(jws, keys, kid)
	if err == nil || known {
		return payload, err
	}
	return nil, errUnknownKey
}

// verifyWith verifies jws with the key of ID kid, or with each key when it
// names none; known reports whether there was such a key, that is whether
// reading the keys again could not help.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) (payload []byte, known bool, err error) {
	for _, key := range keys {
		if key.Use == "enc" || (kid != "" && key.KeyID != kid) {
			continue
		}
		if payload, err := jws.Verify(&key); err == nil {
			return payload, true, nil
		}
		known = kid != ""
	}
	if known {
		return nil, true, errSignature
	}
	return nil, false, errUnknownKey
}

// cached returns the keys, and whether they are old enough to be read again.
func (k *keySet) cached() (keys []jose.JSONWebKey, stale bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, !k.fetchedAt.IsZero() && time.Since(k.fetchedAt) > k.maxAge && time.Since(k.triedAt) >= k.floor
}

// refresh reads the keys again, unless the last read is less than floor
// ago: then it returns that read's error, or errUnknownKey when it
// succeeded, since the keys it read are those the cache has. Callers that
// come while a read runs wait for it.
func (k *keySet) refresh(ctx context.Context) error {
	k.mu.Lock()
	if done := k.reading; done != nil {
		k.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ErrUnavailable, ctx.Err())
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.lastErr
	}
	if !k.triedAt.IsZero() && time.Since(k.triedAt) < k.floor {
		defer k.mu.Unlock()
		if k.lastErr != nil {
			return k.lastErr
		}
		return errUnknownKey
	}
	done := make(chan struct{})
	k.reading = done
	k.mu.Unlock()

	keys, err := k.fetch(ctx)

	k.mu.Lock()
	defer k.mu.Unlock()
	k.triedAt, k.lastErr, k.reading = time.Now(), err, nil
	if err == nil {
		k.keys, k.fetchedAt = keys, k.triedAt
	}
	close(done)
	return err
}

// fetch reads the key set. Its errors wrap ErrUnavailable and may name the
// URL, for the log.
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	// The read serves every caller waiting for it: one that goes away
	// does not cancel it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the keys: %v", ErrUnavailable, err)
	}
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the keys: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: reading the keys from %s: %v", ErrUnavailable, k.url, err)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: reading the keys from %s: %s", ErrUnavailable, k.url, resp.Status)
	case len(data) > maxKeySetBytes:
		return nil, fmt.Errorf("%w: the keys at %s are larger than %d bytes", ErrUnavailable, k.url, maxKeySetBytes)
	}
	keys, err := parseKeySet(data)
	if err != nil {
		return nil, fmt.Errorf("%w: the keys at %s: %v", ErrUnavailable, k.url, err)
	}
	return keys, nil
}

// allAlgs are the algorithms a key may advertise and a token may use.
var allAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512,
	jose.PS256, jose.PS384, jose.PS512, jose.EdDSA}

// parseKeySet reads a JSON Web Key Set, leaving out the keys of algorithms
// or types it does not know rather than failing on them (RFC 7517, 5), as
// go-oidc does.
func parseKeySet(data []byte) ([]jose.JSONWebKey, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	var out []jose.JSONWebKey
	for _, key := range raw.Keys {
		var meta struct {
			Alg string `json:"alg"`
		}
		if err := json.Unmarshal(key, &meta); err != nil {
			return nil, err
		}
		if meta.Alg != "" && !slices.Contains(allAlgs, jose.SignatureAlgorithm(meta.Alg)) {
			continue
		}
		var jwk jose.JSONWebKey
		if err := json.Unmarshal(key, &jwk); err != nil {
			if errors.Is(err, jose.ErrUnsupportedKeyType) {
				continue
			}
			return nil, err
		}
		out = append(out, jwk)
	}
	return out, nil
}
