package config

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// TestGitLabWebhookSecrets checks that the GitLab token and signing key
// are resolved like the other secrets, listed for masking, and that a
// signing key that does not parse is refused at load without being shown.
func TestGitLabWebhookSecrets(t *testing.T) {
	t.Parallel()
	key := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	const data = "webhooks: {githubSecretEnv: GH, gitlabTokenEnv: GL_TOKEN, gitlabSigningKeyEnv: GL_KEY}\n"
	c, err := Parse([]byte(data), env(map[string]string{"GH": "gh-s3cr3t", "GL_TOKEN": "gl-s3cr3t-token", "GL_KEY": key}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Webhooks.GitLabToken() != "gl-s3cr3t-token" || c.Webhooks.GitLabSigningKey() != key {
		t.Errorf("GitLab secrets not resolved: %q %q", c.Webhooks.GitLabToken(), c.Webhooks.GitLabSigningKey())
	}
	var listed []string
	for _, s := range c.Secrets() {
		listed = append(listed, s.Setting+" "+s.Env+"="+s.Value())
	}
	want := []string{"webhooks.githubSecretEnv GH=gh-s3cr3t", "webhooks.gitlabTokenEnv GL_TOKEN=gl-s3cr3t-token",
		"webhooks.gitlabSigningKeyEnv GL_KEY=" + key}
	if strings.Join(listed, "\n") != strings.Join(want, "\n") {
		t.Errorf("Secrets() =\n%s\nwant\n%s", strings.Join(listed, "\n"), strings.Join(want, "\n"))
	}

	// Either alone is enough.
	for _, tc := range []struct{ yaml, token, key string }{
		{"webhooks: {gitlabTokenEnv: GL_TOKEN}\n", "gl-s3cr3t-token", ""},
		{"webhooks: {gitlabSigningKeyEnv: GL_KEY}\n", "", key},
	} {
		c, err := Parse([]byte(tc.yaml), env(map[string]string{"GL_TOKEN": "gl-s3cr3t-token", "GL_KEY": key}))
		if err != nil {
			t.Fatal(err)
		}
		if c.Webhooks.GitLabToken() != tc.token || c.Webhooks.GitLabSigningKey() != tc.key || c.Webhooks.GitHubSecret() != "" {
			t.Errorf("%s: resolved %q %q", tc.yaml, c.Webhooks.GitLabToken(), c.Webhooks.GitLabSigningKey())
		}
	}

	for _, tc := range []struct {
		name, key, msg string
	}{
		{"no prefix", "s3cr3t" + strings.Repeat("A", 38), `starts with "whsec_"`},
		{"not base64", "whsec_s3cr3t!" + strings.Repeat("A", 31), "not standard base64"},
		{"too short", "whsec_" + base64.StdEncoding.EncodeToString([]byte("s3cr3t-16-bytes!")), "16 bytes"},
		{"too long", "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("s3cr3t", 11))), "66 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte("webhooks: {gitlabSigningKeyEnv: GL_KEY}\n"), env(map[string]string{"GL_KEY": tc.key}))
			var ce *Error
			if err == nil || !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *Error", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "webhooks.gitlabSigningKeyEnv: environment variable GL_KEY does not hold a signing key") ||
				!strings.Contains(msg, tc.msg) {
				t.Errorf("error %q does not say %q", msg, tc.msg)
			}
			if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), strings.TrimPrefix(tc.key, "whsec_")) {
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
	if _, err := Parse([]byte("webhooks: {gitlabTokenEnv: NOPE}\n"), env(nil)); err == nil ||
		!strings.Contains(err.Error(), "webhooks.gitlabTokenEnv: environment variable NOPE is not set") {
		t.Errorf("unset token variable: %v", err)
	}
}
