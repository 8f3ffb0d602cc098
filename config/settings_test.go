package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/config"
)

// LoadSettings reads a file whose secrets are not set, lists them, and
// keeps the ones that are; Load refuses the same file, naming each.
func TestLoadSettingsLeavesUnsetSecrets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no8s.yaml")
	data := "database: postgres://db/no8s\nlisten: 127.0.0.1:9\napi: {writeTokenEnv: WRITE, readTokenEnv: READ}\n" +
		"webhooks: {githubSecretEnv: HOOK}\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"READ": "read-token-value-1234", "HOOK": "  "}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	if _, err := config.Load(path, getenv); err == nil || !strings.Contains(err.Error(), "api.writeTokenEnv: environment variable WRITE is not set") ||
		!strings.Contains(err.Error(), "webhooks.githubSecretEnv: environment variable HOOK is empty") {
		t.Fatalf("Load: %v; want both secrets named", err)
	}
	cfg, err := config.LoadSettings(path, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database != "postgres://db/no8s" || cfg.Listen != "127.0.0.1:9" || cfg.API.ReadToken() != "read-token-value-1234" || cfg.API.WriteToken() != "" {
		t.Errorf("settings: database %q, listen %q, read token set %v, write token set %v", cfg.Database, cfg.Listen,
			cfg.API.ReadToken() != "", cfg.API.WriteToken() != "")
	}
	var missing []string
	for _, s := range cfg.MissingSecrets() {
		missing = append(missing, s.Setting+"="+s.Env)
	}
	if got := strings.Join(missing, " "); got != "api.writeTokenEnv=WRITE webhooks.githubSecretEnv=HOOK" {
		t.Errorf("MissingSecrets: %s", got)
	}
	if len(cfg.Secrets()) != 1 {
		t.Errorf("Secrets: %v; want the read token only", cfg.Secrets())
	}
}
