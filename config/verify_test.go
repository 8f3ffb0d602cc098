package config

import "testing"

// TestVerifyDefaults: a source with verify checks the head, and refuses a
// head older than the applied commit until it is approved, unless told.
func TestVerifyDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		yaml, mode, rollback string
	}{
		{"{sshAllowedSignersFile: /etc/hostname}", VerifyHead, RollbackRefuse},
		{"{mode: all, rollback: allow, sshAllowedSignersFile: /etc/hostname}", VerifyAll, RollbackAllow},
		{"{rollback: refuse, sshAllowedSignersFile: /etc/hostname}", VerifyHead, RollbackRefuse},
	}
	for _, tc := range tests {
		t.Run(tc.yaml, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte("sources:\n- name: infra\n  git: {url: 'https://h/r.git', verify: "+tc.yaml+"}\n"), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if v := c.Sources[0].Git.Verify; v.Mode != tc.mode || v.Rollback != tc.rollback {
				t.Fatalf("verify %+v, want mode %s rollback %s", v, tc.mode, tc.rollback)
			}
		})
	}
}
