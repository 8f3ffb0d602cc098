// Package commitsig verifies the signatures on Git commits against keys
// the operator trusts, for a Git source's verify setting
// (verify: {mode, openpgpKeysFile, sshAllowedSignersFile}).
//
// A signed commit carries its signature in the gpgsig header, which go-git
// exposes as object.Commit.PGPSignature whatever the format. The signed
// payload is the raw commit object with that header removed, exactly as
// git computes it; go-git's EncodeWithoutSignature reproduces those bytes
// from the object the commit was decoded from.
//
// Two signature formats are understood:
//
//   - OpenPGP ("-----BEGIN PGP SIGNATURE-----"), checked against the
//     keys in Config.OpenPGPKeysFile: one or more ASCII-armored public key
//     blocks as `gpg --export --armor` writes them, one after another.
//     Blank lines and lines starting with "#" may stand between blocks;
//     anything else outside a block is an error. A key that is expired or
//     revoked now does not verify, whenever the commit was signed: that is
//     what `git verify-commit` does too, and it lets a compromised key be
//     revoked by re-exporting it.
//
//   - SSH ("-----BEGIN SSH SIGNATURE-----", the SSHSIG format of OpenSSH's
//     PROTOCOL.sshsig, made by `git commit -S` with gpg.format=ssh),
//     checked against Config.SSHAllowedSignersFile, in the allowed signers
//     format of ssh-keygen(1) that git's gpg.ssh.allowedSignersFile uses:
//
//     principals [options] keytype base64-key [comment]
//
//     Principals are a comma-separated list of patterns (reported, not
//     matched: git asks ssh-keygen which principals a key has rather than
//     checking them against the committer). Options are namespaces="list"
//     (patterns; the key signs commits only if "git" matches), and
//     valid-after="time" and valid-before="time", both inclusive, with time
//     as YYYYMMDD[HHMM[SS]] in local time or followed by Z or UTC for UTC.
//     Both the commit's committer time (what git compares them with) and
//     the time of verification must be inside them: the committer sets the
//     commit's time, so a key retired with valid-before would otherwise
//     still sign commits backdated into its window. This is what OpenPGP
//     expiry does too.
//     cert-authority lines are refused: SSH certificates are not supported.
//     The signature's own namespace must be "git". ed25519, ECDSA and RSA
//     keys are understood; RSA signatures must be rsa-sha2-256 or
//     rsa-sha2-512, as SSHSIG requires, not SHA-1. When several lines name
//     the signing key, the first whose options allow the commit wins.
//
// # Key rotation
//
// A Verifier reads its key files when it is made and again whenever they
// change: every Verify looks at the file's size, modification time and
// identity, which costs one stat when nothing changed, and reads and parses
// it again when any of them differs. A file modified within the last two
// seconds is read again on every call regardless, since a second write in
// the same clock tick would leave its stat unchanged. So keys are rotated
// by editing or replacing the files, without a restart. A file that cannot
// be read or parsed makes Verify fail with a *FileError naming the file and
// line, rather than fall back to the keys it held before: an operator who
// broke the file learns of it, and nothing is trusted by accident.
//
// A commit that fails verification is reported as an *UnverifiedError,
// whose Unwrap gives ErrNotSigned, ErrUntrusted, ErrBadSignature or
// ErrNotConfigured.
package commitsig
