package faults_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/source/git/commitsig/sigtest"
)

// signaturesTokenEnv holds the write token of the agents of these
// scenarios, with which rollbacks are approved. The agent processes inherit
// the test binary's environment, which parallel tests cannot change: it is
// set once, before any test runs.
const (
	signaturesTokenEnv = "NO8S_FAULTS_SIGNATURES_TOKEN"
	signaturesToken    = "signatures-5d0a31"
)

func init() { os.Setenv(signaturesTokenEnv, signaturesToken) }

// startSignedFleet is startFleet with a write token for approvals.
func startSignedFleet(t *testing.T, sources string) *fleet {
	t.Helper()
	return startFleetWith(t, fmt.Sprintf("api: {writeTokenEnv: %s}\n", signaturesTokenEnv), sources)
}

// signedRemote is a Git remote whose commits are signed, or not, with SSH
// keys made for the test, and the allowed signers file the agent trusts.
type signedRemote struct {
	*gitRemote
	keys    *sigtest.Keys
	signers string
}

func newSignedRemote(t *testing.T) *signedRemote {
	t.Helper()
	return &signedRemote{gitRemote: newGitRemote(t), keys: sigtest.New(t), signers: filepath.Join(t.TempDir(), "allowed_signers")}
}

// newOpsRemote returns a signed remote whose allowed signers are the SSH
// key ops alone, that key, and the files of the Site type and one site,
// not committed yet.
func newOpsRemote(t *testing.T) (*signedRemote, sigtest.SSHKey, map[string]string) {
	t.Helper()
	remote := newSignedRemote(t)
	ops := remote.keys.SSH("ops")
	remote.keys.WriteAllowedSigners(remote.signers, ops)
	files := sites("sites", 1, 1)
	files["types/site.yaml"] = siteType
	return remote, ops, files
}

// Signed commits files signed by key and returns the commit. Every commit
// of the remote is dated in May 2024 (see gittest.Repo.Commit).
func (r *signedRemote) Signed(t *testing.T, key sigtest.SSHKey, files map[string]string, msg string) string {
	t.Helper()
	r.repo.Write(files)
	return r.repo.CommitSigned(msg, r.keys.Env(), sigtest.SignWithSSH(key)...)
}

// ForcePush moves main to commit, as `git push --force` of an older
// commit does.
func (r *signedRemote) ForcePush(t *testing.T, commit string) {
	t.Helper()
	r.Run(t, "reset", "-q", "--hard", commit)
}

// verifiedSource is the sources block of a source "sites" on the remote,
// polled every second, with verify settings (a YAML flow mapping's
// contents, without the allowed signers file).
func (r *signedRemote) verifiedSource(verify string) string {
	return fmt.Sprintf(`  - name: sites
    git:
      url: %q
      branch: main
      interval: 1s
      verify: {%s, sshAllowedSignersFile: %q}`, r.FileURL(), verify, r.signers)
}

// stalledOnRollback waits until the source refuses commit as a rollback,
// waiting for an approval.
func stalledOnRollback(t *testing.T, f *fleet, commit string) apiSource {
	t.Helper()
	return f.waitSource(t, "sites", "the rollback to "+commit[:8]+" to be refused", func(s apiSource) bool {
		return failedWith("stalled", "RollbackRefused", "goes back in history")(s) && strings.HasSuffix(s.LastAttemptedRevision, commit)
	})
}

// stillRefused checks, over a few more polls of the source, that the
// refused revision stays refused and nothing is destroyed: sites resources
// stay, none deleting, and no destroy is called.
func stillRefused(t *testing.T, f *fleet, commit string, sites int) {
	t.Helper()
	destroys := countCalls(t, f.world, "destroy")
	runs := syncRuns(t, f.base, "sites")
	waitUntil(t, time.Minute, "three more looks at the source", func() (bool, string) {
		n := syncRuns(t, f.base, "sites")
		return n >= runs+3, fmt.Sprintf("%d sync attempts since the refusal", n-runs)
	})
	src := f.waitSource(t, "sites", "the source to be read", func(apiSource) bool { return true })
	if strings.HasSuffix(src.LastAppliedRevision, commit) || src.Phase != "stalled" {
		t.Fatalf("the refused revision went through: %+v", src)
	}
	if n := countCalls(t, f.world, "destroy"); n != destroys {
		t.Fatalf("%d destroy call(s) while the rollback was refused", n-destroys)
	}
	f.assertKept(t, sites)
}

// TestSecuritySignaturesRollbackToUnsignedHistory applies a signed commit
// declaring three sites on top of an unsigned commit made before the
// signature policy, which declares one, then force-pushes the branch back
// to the unsigned commit. Mode all checks every commit since the applied
// one, and there is none: the head must still be checked, and going back
// must wait for an approval. Approved through the CLI, it is still refused:
// the head is unsigned, and an approval vouches for going back, not for who
// made the commit.
func TestSecuritySignaturesRollbackToUnsignedHistory(t *testing.T) {
	t.Parallel()
	remote, ops, files := newOpsRemote(t)
	prePolicy := remote.Commit(t, files, "unsigned, before the policy")
	head := remote.Signed(t, ops, sites("sites", 3, 1), "signed: three sites")
	f := startSignedFleet(t, remote.verifiedSource("mode: all"))
	f.waitApplied(t, "sites", head, 3)

	remote.ForcePush(t, prePolicy)
	src := stalledOnRollback(t, f, prePolicy)
	if !strings.Contains(src.Message, "not signed") {
		t.Errorf("the refusal does not say the commit is not signed: %s", src.Message)
	}
	stillRefused(t, f, prePolicy, 3)

	out, err := exec.CommandContext(t.Context(), agentBinary(t), "approve", "source", "sites", "--server", f.base,
		"--token-env", signaturesTokenEnv, "--revision", "main@sha1:"+prePolicy).CombinedOutput()
	if err != nil {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	// The approval says going back is intended, not who made the commit:
	// the head is still verified, refused, and nothing is destroyed.
	f.waitSource(t, "sites", "the approved rollback to be refused for its signature", func(s apiSource) bool {
		return failedWith("failed", "SignatureRejected", "commit "+prePolicy[:8]+": not signed")(s) &&
			strings.HasSuffix(s.LastAttemptedRevision, prePolicy)
	})
	src = f.waitSource(t, "sites", "the source to be read", func(apiSource) bool { return true })
	if strings.HasSuffix(src.LastAppliedRevision, prePolicy) {
		t.Fatalf("the unsigned revision was applied: %+v", src)
	}
	if n := countCalls(t, f.world, "destroy"); n != 0 {
		t.Fatalf("%d destroy call(s) after the approval of an unsigned rollback", n)
	}
	if w := readWorld(t, f.world); len(w) != 3 {
		t.Fatalf("world holds %d sites, want 3", len(w))
	}
}

// TestSecuritySignaturesRollbackToSignedCommit force-pushes the branch back
// to an older commit signed by the trusted key: a good signature says who
// made the commit, not that it is the newest, so it waits for an approval
// too (given through the API here), in both modes.
func TestSecuritySignaturesRollbackToSignedCommit(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"head", "all"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			remote, ops, files := newOpsRemote(t)
			old := remote.Signed(t, ops, files, "signed: one site")
			f := startSignedFleet(t, remote.verifiedSource("mode: "+mode))
			f.waitApplied(t, "sites", old, 1)
			head := remote.Signed(t, ops, sites("sites", 3, 1), "signed: three sites")
			f.waitApplied(t, "sites", head, 3)

			remote.ForcePush(t, old)
			stalledOnRollback(t, f, old)
			stillRefused(t, f, old, 3)

			// Approving anything but the stalled revision is refused.
			if code, body := sigPost(t, f.base+"/api/v1/sources/sites/approve?revision=main@sha1:"+head); code != http.StatusConflict {
				t.Fatalf("approving the applied revision answered %d %s, want 409", code, body)
			}
			if code, body := sigPost(t, f.base+"/api/v1/sources/sites/approve?revision=main@sha1:"+old); code != http.StatusAccepted {
				t.Fatalf("approve answered %d %s", code, body)
			}
			f.waitApplied(t, "sites", old, 1)

			// Forward again, then back again: the approval is spent.
			head = remote.Signed(t, ops, sites("sites", 2, 1), "signed: two sites")
			f.waitApplied(t, "sites", head, 2)
			remote.ForcePush(t, old)
			stalledOnRollback(t, f, old)
			stillRefused(t, f, old, 2)
		})
	}
}

// TestSecuritySignaturesRollbackAllowed sets verify.rollback: allow, which
// applies a signed ancestor of the applied commit without an approval; the
// head is still checked, so an unsigned ancestor is refused outright.
func TestSecuritySignaturesRollbackAllowed(t *testing.T) {
	t.Parallel()
	remote, ops, files := newOpsRemote(t)
	prePolicy := remote.Commit(t, files, "unsigned, before the policy")
	signedOne := remote.Signed(t, ops, sites("sites", 2, 1), "signed: two sites")
	head := remote.Signed(t, ops, sites("sites", 3, 1), "signed: three sites")
	f := startSignedFleet(t, remote.verifiedSource("mode: all, rollback: allow"))
	f.waitApplied(t, "sites", head, 3)

	remote.ForcePush(t, signedOne)
	f.waitApplied(t, "sites", signedOne, 2)

	remote.ForcePush(t, prePolicy)
	f.waitSource(t, "sites", "the unsigned ancestor to be refused", func(s apiSource) bool {
		return failedWith("failed", "SignatureRejected", "commit "+prePolicy[:8]+": not signed")(s) &&
			strings.HasSuffix(s.LastAttemptedRevision, prePolicy)
	})
	if n := countCalls(t, f.world, "destroy"); n != 1 {
		t.Fatalf("%d destroy call(s), want the one of the allowed rollback", n)
	}
	if rs := listResources(t, f.base); len(rs) != 2 {
		t.Fatalf("%d resources after the refused rollback, want 2", len(rs))
	}
}

// TestSecuritySignaturesRetiredSSHKey retires an SSH key in the allowed
// signers file (valid-before in the past). A commit it signs, dated by its
// author inside the key's old window, must not verify: the committer sets
// that date.
func TestSecuritySignaturesRetiredSSHKey(t *testing.T) {
	t.Parallel()
	remote := newSignedRemote(t)
	ops, retired := remote.keys.SSH("ops"), remote.keys.SSH("retired")
	writeFile(t, remote.signers, fmt.Sprintf("ops@example.com namespaces=\"git\" %s\nold@example.com namespaces=\"git\",valid-after=\"20240101Z\",valid-before=\"20250101Z\" %s\n",
		ops.Public, retired.Public))
	files := sites("sites", 1, 1)
	files["types/site.yaml"] = siteType
	head := remote.Signed(t, ops, files, "signed by the current key")
	f := startSignedFleet(t, remote.verifiedSource("mode: head"))
	f.waitApplied(t, "sites", head, 1)

	// The remote's commits are dated May 2024, inside the retired key's window.
	backdated := remote.Signed(t, retired, map[string]string{"sites/s00.yaml": site("s00", 9), "sites/s01.yaml": site("s01", 9)},
		"signed by the retired key")
	f.waitSource(t, "sites", "the retired key's commit to be refused", func(s apiSource) bool {
		return failedWith("failed", "SignatureRejected", "commit "+backdated[:8], retired.Fingerprint, "valid before")(s) &&
			strings.HasSuffix(s.LastAttemptedRevision, backdated)
	})
	f.assertIntact(t, 1)
	if w := readWorld(t, f.world); w["s00"] != `{"replicas":1}` {
		t.Fatalf("the world holds %v after the refusal", w)
	}
}

// sigPost sends an empty POST with the write token and returns the status
// and body.
func sigPost(t *testing.T, url string) (int, string) {
	t.Helper()
	return tokenCall(t, http.MethodPost, url, signaturesToken)
}
