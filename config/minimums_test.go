package config

import (
	"strings"
	"testing"
)

// TestDurationMinimums checks that every duration of the configuration has
// a floor, named with its key in the error, and that the floor itself is
// accepted.
func TestDurationMinimums(t *testing.T) {
	t.Parallel()
	const git = "sources:\n- name: infra\n  git: {url: 'https://github.com/acme/infra.git'"
	tests := []struct {
		name, yaml, key, msg string
	}{
		{"lease of 1ns", "reconcile: {leaseDuration: 1ns}\n", "reconcile.leaseDuration", "must be at least 1s, not 1ns"},
		{"lease of 999ms", "reconcile: {leaseDuration: 999ms}\n", "reconcile.leaseDuration", "must be at least 1s, not 999ms"},
		{"source interval of 1ns", "sources:\n- name: local\n  dir: .\n  interval: 1ns\n", "sources[0].interval", "must be at least 1s, not 1ns"},
		{"git interval of 1ns", git + ", interval: 1ns}\n", "sources[0].git.interval", "must be at least 1s, not 1ns"},
		{"git timeout of 1ms", git + ", timeout: 1ms}\n", "sources[0].git.timeout", "must be at least 1s, not 1ms"},
		{"pull request poll of 1s", git + "}\n  pullRequests: {enabled: true, tokenEnv: T, interval: 1s}\n",
			"sources[0].pullRequests.interval", "must be at least 10s, not 1s"},
		{"negative pull request poll", git + "}\n  pullRequests: {enabled: true, tokenEnv: T, interval: -1m}\n",
			"sources[0].pullRequests.interval", "must be positive (at least 10s), not -1m0s"},
		{"backoff initial of 1ns", "reconcile: {backoff: {initial: 1ns}}\n", "reconcile.backoff.initial", "must be at least 100ms, not 1ns"},
		{"backoff max of 10ms", "reconcile: {backoff: {initial: 100ms, max: 10ms}}\n", "reconcile.backoff.max", "must be at least 100ms, not 10ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.yaml), env(map[string]string{"T": "x"}))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.yaml)
			}
			if want := tc.key + ": " + tc.msg; !strings.Contains(err.Error(), want) {
				t.Errorf("error\n%s\ndoes not contain %q", err, want)
			}
		})
	}
	atMinimum := git + ", interval: 1s, timeout: 1s}\n  pullRequests: {enabled: true, tokenEnv: T, interval: 10s}\n" +
		"reconcile: {leaseDuration: 1s, backoff: {initial: 100ms, max: 100ms}}\n"
	if _, err := Parse([]byte(atMinimum), env(map[string]string{"T": "x"})); err != nil {
		t.Errorf("the minimums themselves refused: %v", err)
	}
}
