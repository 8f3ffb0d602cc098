package oidc

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Login signs people in with the authorization code flow and PKCE (S256):
// it sends them to the issuer's authorization endpoint, exchanges the code
// the issuer sends back at its token endpoint, and verifies the ID token it
// gets there as Verifier does, for the client's own ID as the audience and
// with the nonce of the sign-in.
type Login struct {
	v      *Verifier
	config oauth2.Config
}

// LoginConfig configures a Login.
type LoginConfig struct {
	// IssuerURL is the issuer, read on first use; Claim names the API
	// token, as for Verifier.
	IssuerURL, Claim string
	// ClientID is the OAuth client, and the audience its ID tokens must
	// have. ClientSecret is "" for a public client, which proves itself
	// with PKCE only.
	ClientID, ClientSecret string
	// RedirectURL is where the issuer sends people back with a code.
	RedirectURL string
	// Scopes are asked for; "openid" is added when missing.
	Scopes []string
}

// NewLogin returns a Login; the issuer is read on first use.
func NewLogin(c LoginConfig) *Login {
	scopes := c.Scopes
	if !slices.Contains(scopes, gooidc.ScopeOpenID) {
		scopes = append([]string{gooidc.ScopeOpenID}, scopes...)
	}
	style := oauth2.AuthStyleInHeader // client_secret_basic, the default of OpenID Connect
	if c.ClientSecret == "" {
		style = oauth2.AuthStyleInParams // a public client sends its ID alone
	}
	return &Login{
		v: New(c.IssuerURL, c.ClientID, c.Claim),
		config: oauth2.Config{ClientID: c.ClientID, ClientSecret: c.ClientSecret, RedirectURL: c.RedirectURL, Scopes: scopes,
			Endpoint: oauth2.Endpoint{AuthStyle: style}},
	}
}

// endpoints returns the client's configuration with the issuer's
// endpoints, reading its discovery document when it has not yet.
func (l *Login) endpoints(ctx context.Context) (oauth2.Config, error) {
	if _, err := l.v.idVerifier(ctx); err != nil {
		return oauth2.Config{}, err
	}
	l.v.mu.Lock()
	ep := l.v.endpoint
	l.v.mu.Unlock()
	if ep.AuthURL == "" || ep.TokenURL == "" {
		return oauth2.Config{}, fmt.Errorf("%w: the discovery document has no authorization or token endpoint", ErrUnavailable)
	}
	c := l.config
	c.Endpoint.AuthURL, c.Endpoint.TokenURL = ep.AuthURL, ep.TokenURL
	return c, nil
}

// AuthURL is the issuer's authorization endpoint asking to sign in, with
// the sign-in's state, nonce and the S256 challenge of verifier. Its errors
// wrap ErrUnavailable.
func (l *Login) AuthURL(ctx context.Context, state, nonce, verifier string) (string, error) {
	c, err := l.endpoints(ctx)
	if err != nil {
		return "", err
	}
	return c.AuthCodeURL(state, gooidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// Issuer is the issuer identifier the login was configured with, which
// an authorization response's iss parameter must equal (RFC 9207).
func (l *Login) Issuer() string { return l.v.issuer }

// ErrRefused means the issuer refused to exchange the code (used,
// expired, another client's, a wrong verifier or redirect URI, a wrong
// client secret). It wraps ErrInvalid.
var ErrRefused = fmt.Errorf("%w: the identity provider refused the sign-in", ErrInvalid)

// Exchange trades code for tokens with verifier, and verifies the ID token
// among them: the issuer's signature, the issuer, the client's ID among
// its audiences and as its azp if it has one, its expiry, and nonce. Its
// errors wrap ErrInvalid or ErrUnavailable; their messages name no URL and
// quote no token.
func (l *Login) Exchange(ctx context.Context, code, verifier, nonce string) (Identity, error) {
	c, err := l.endpoints(ctx)
	if err != nil {
		return Identity{}, err
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, l.v.client)
	tok, err := c.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500:
		// The issuer's error code tells what it refused; its description,
		// which may quote what was sent, is left out.
		return Identity{}, fmt.Errorf("%w (%s)", ErrRefused, safeCode(re.ErrorCode))
	case err != nil:
		return Identity{}, fmt.Errorf("%w: exchanging the code: %v", ErrUnavailable, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, fmt.Errorf("%w: the token endpoint sent no ID token", ErrInvalid)
	}
	return l.v.identity(ctx, raw, func(t *gooidc.IDToken) error {
		if nonce == "" || subtle.ConstantTimeCompare([]byte(t.Nonce), []byte(nonce)) != 1 {
			return fmt.Errorf("%w: the ID token's nonce is not this sign-in's", ErrInvalid)
		}
		// azp names the client the token was issued to (OpenID Connect
		// Core 3.1.3.7): another client's token is not this sign-in's,
		// even when our client is among its audiences.
		var party struct {
			AZP any `json:"azp"`
		}
		if err := t.Claims(&party); err != nil {
			return invalid(err)
		}
		if azp, ok := party.AZP.(string); party.AZP != nil && (!ok || azp != l.config.ClientID) {
			return fmt.Errorf("%w: the ID token was issued to another client (azp)", ErrInvalid)
		}
		return nil
	})
}

// safeCode is an OAuth error code as it may be shown: its characters are
// those RFC 6749 allows, and it is short.
func safeCode(code string) string {
	if code == "" || len(code) > 64 {
		return "no error code"
	}
	for _, r := range code {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return "no error code"
		}
	}
	return code
}
