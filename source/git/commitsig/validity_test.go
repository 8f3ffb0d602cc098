package commitsig

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSSHValidityJudgedNow signs commits dated inside a key's validity
// window with keys whose window does not hold today: a key retired in the
// past signing a commit backdated into its window, and a key not valid
// until far in the future signing a commit dated into it. The committer
// sets the date, so neither may verify; a key whose window holds both the
// commit and today still does.
func TestSSHValidityJudgedNow(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	retired := l.genSSHKey("retired", "-t", "ed25519")
	early := l.genSSHKey("early", "-t", "ed25519")
	current := l.genSSHKey("current", "-t", "ed25519")

	// commitDate is 2024-06-01, inside the retired key's window.
	backdated := l.commitSSH("backdated by a retired key", retired)
	// Dated 2099-06-01, inside the early key's window, which opens in 2099.
	futureEnv := l.env
	l.env = append(append([]string(nil), l.env...), "GIT_AUTHOR_DATE=2099-06-01T12:00:00+0000", "GIT_COMMITTER_DATE=2099-06-01T12:00:00+0000")
	forwardDated := l.commitSSH("dated ahead by a key not valid yet", early)
	l.env = futureEnv
	good := l.commitSSH("signed by a current key", current)

	signers := l.write("allowed_signers", strings.Join([]string{
		`old@example.com valid-after="20240101Z",valid-before="20250101Z" ` + retired.pub,
		`new@example.com valid-after="20990101Z" ` + early.pub,
		`ops@example.com valid-after="20240101Z",valid-before="29991231Z" ` + current.pub,
		"",
	}, "\n"))
	v, err := New(Config{SSHAllowedSignersFile: signers})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		commit    string
		key       sshKey
		wantInMsg string // "" when the commit verifies
	}{
		{name: "retired key, backdated commit", commit: backdated, key: retired,
			wantInMsg: signers + ":1: valid before 2025-01-01T00:00:00Z, and it is now "},
		{name: "key not valid yet, commit dated ahead", commit: forwardDated, key: early,
			wantInMsg: signers + ":2: valid after 2099-01-01T00:00:00Z, and it is now "},
		{name: "key valid at the commit and now", commit: good, key: current},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := v.Verify(l.commitObject(tc.commit))
			if tc.wantInMsg == "" {
				if err != nil || got.Fingerprint != tc.key.fp {
					t.Fatalf("Verify = %+v, %v; want signed by %s", got, err, tc.key.fp)
				}
				return
			}
			var ue *UnverifiedError
			if !errors.As(err, &ue) || !errors.Is(err, ErrUntrusted) || ue.Key != tc.key.fp {
				t.Fatalf("Verify = %+v, %v; want ErrUntrusted naming %s", got, err, tc.key.fp)
			}
			if !strings.Contains(err.Error(), tc.wantInMsg) {
				t.Errorf("error = %q\nwant it to hold %q", err, tc.wantInMsg)
			}
			// The time given as now is the time of the check.
			_, after, _ := strings.Cut(err.Error(), "and it is now ")
			end := strings.IndexAny(after, " )")
			if end < 0 {
				end = len(after)
			}
			now, perr := time.Parse(time.RFC3339, after[:end])
			if perr != nil || time.Since(now).Abs() > time.Minute {
				t.Errorf("error = %q does not say what time it is: %v", err, perr)
			}
		})
	}
}
