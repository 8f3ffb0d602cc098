package commitsig

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// gitNamespace is the SSHSIG namespace git signs commits in.
const gitNamespace = "git"

// allowedSigner is one line of an allowed signers file.
type allowedSigner struct {
	line       int
	principals string
	// namespaces is the namespaces option's pattern list; nil when the
	// line has none, which allows every namespace.
	namespaces  *string
	validAfter  time.Time
	validBefore time.Time
}

// allowedSigners is a parsed allowed signers file.
type allowedSigners struct {
	path string
	// byKey maps a public key's wire encoding to its lines in file order.
	byKey map[string][]allowedSigner
}

// parseAllowedSigners reads an allowed signers file as ssh-keygen does
// (see ALLOWED SIGNERS in ssh-keygen(1)).
func parseAllowedSigners(path string, data []byte) (*allowedSigners, error) {
	s := &allowedSigners{path: path, byKey: map[string][]allowedSigner{}}
	for i, line := range splitLines(data) {
		line = strings.TrimLeft(line, " \t")
		if line == "" || line[0] == '#' {
			continue
		}
		signer, key, err := parseAllowedSignerLine(line)
		if err != nil {
			return nil, &FileError{Path: path, Line: i + 1, Err: err}
		}
		signer.line = i + 1
		k := string(key.Marshal())
		s.byKey[k] = append(s.byKey[k], signer)
	}
	return s, nil
}

// parseAllowedSignerLine parses "principals [options] keytype base64 [comment]".
func parseAllowedSignerLine(line string) (allowedSigner, ssh.PublicKey, error) {
	var s allowedSigner
	principals, rest, err := nextField(line)
	if err != nil {
		return s, nil, err
	}
	if principals == "" || rest == "" {
		return s, nil, errors.New("expected principals, options and a key")
	}
	s.principals = principals
	// As in ssh-keygen, the options are what stands before the key: if the
	// next field does not start a key, it is the options.
	key, err := parseKey(rest)
	if err != nil {
		// A field naming a key type is a broken key, not options; saying
		// so beats complaining about an unknown option "ssh-ed25519".
		if first, _, _ := nextField(rest); looksLikeKeyType(first) {
			return s, nil, err
		}
		opts, keyText, ok := splitOptions(rest)
		if !ok {
			return s, nil, errors.New("options have no closing quote")
		}
		if keyText == "" {
			return s, nil, errors.New("missing key")
		}
		if key, err = parseKey(keyText); err != nil {
			return s, nil, err
		}
		if err := s.parseOptions(opts); err != nil {
			return s, nil, err
		}
	}
	return s, key, nil
}

// nextField splits off the first whitespace-delimited field, which may be
// double-quoted to hold spaces.
func nextField(s string) (field, rest string, err error) {
	if strings.HasPrefix(s, `"`) {
		end := strings.IndexByte(s[1:], '"')
		if end < 0 {
			return "", "", errors.New("principals have no closing quote")
		}
		return s[1 : end+1], strings.TrimLeft(s[end+2:], " \t"), nil
	}
	end := strings.IndexAny(s, " \t")
	if end < 0 {
		return s, "", nil
	}
	return s[:end], strings.TrimLeft(s[end:], " \t"), nil
}

// parseKey parses "keytype base64 [comment]".
func parseKey(s string) (ssh.PublicKey, error) {
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return nil, errors.New("expected a key type and a base64 key")
	}
	blob, err := base64.StdEncoding.DecodeString(fields[1])
	if err != nil {
		return nil, fmt.Errorf("key %s: invalid base64: %w", fields[0], err)
	}
	key, err := ssh.ParsePublicKey(blob)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", fields[0], err)
	}
	if key.Type() != fields[0] {
		return nil, fmt.Errorf("key type %q does not match the key, which is %q", fields[0], key.Type())
	}
	if _, ok := key.(*ssh.Certificate); ok {
		return nil, errors.New("certificates cannot be allowed signers; name the certificate authority's key")
	}
	return key, nil
}

// looksLikeKeyType reports whether a field is an OpenSSH key type name,
// such as ssh-ed25519, ecdsa-sha2-nistp256 or sk-ssh-ed25519@openssh.com.
func looksLikeKeyType(field string) bool {
	return !strings.ContainsAny(field, `="`) &&
		(strings.HasPrefix(field, "ssh-") || strings.HasPrefix(field, "ecdsa-") || strings.HasPrefix(field, "sk-"))
}

// splitOptions splits the options, which end at the first whitespace
// outside double quotes, from the key after them. ok is false when a quote
// is left open.
func splitOptions(s string) (opts, rest string, ok bool) {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && inQuote && i+1 < len(s):
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && (c == ' ' || c == '\t'):
			return s[:i], strings.TrimLeft(s[i:], " \t"), true
		}
	}
	return s, "", !inQuote
}

// parseOptions parses the comma-separated options of a line, names
// matched case-insensitively and values double-quoted, as ssh-keygen
// requires.
func (s *allowedSigner) parseOptions(opts string) error {
	for {
		name, value, hasValue, rest, err := nextOption(opts)
		if err != nil {
			return err
		}
		switch strings.ToLower(name) {
		case "cert-authority":
			if hasValue {
				return errors.New(`option "cert-authority" takes no value`)
			}
			return errors.New("cert-authority lines are not supported: SSH certificates cannot be verified here")
		case "namespaces":
			if !hasValue {
				return errors.New(`option "namespaces" needs a value`)
			}
			if s.namespaces != nil {
				return errors.New(`more than one "namespaces" option`)
			}
			s.namespaces = &value
		case "valid-after", "valid-before":
			if !hasValue {
				return fmt.Errorf("option %q needs a value", name)
			}
			t, err := parseSSHTime(value)
			if err != nil {
				return fmt.Errorf("option %q: %w", name, err)
			}
			dst := &s.validAfter
			if strings.EqualFold(name, "valid-before") {
				dst = &s.validBefore
			}
			if !dst.IsZero() {
				return fmt.Errorf("more than one %q option", name)
			}
			*dst = t
		default:
			return fmt.Errorf("unsupported option %q", name)
		}
		if rest == "" {
			break
		}
		opts = rest
	}
	if !s.validAfter.IsZero() && !s.validBefore.IsZero() && !s.validBefore.After(s.validAfter) {
		return errors.New(`"valid-before" is not after "valid-after"`)
	}
	return nil
}

// nextOption splits off the first option: name, or name="value" with \"
// standing for a quote inside the value.
func nextOption(opts string) (name, value string, hasValue bool, rest string, err error) {
	end := strings.IndexAny(opts, "=,")
	if end < 0 {
		return opts, "", false, "", nil
	}
	name = opts[:end]
	if name == "" {
		return "", "", false, "", errors.New("empty option")
	}
	if opts[end] == ',' {
		rest = opts[end+1:]
		if rest == "" {
			return "", "", false, "", errors.New("options end with a comma")
		}
		return name, "", false, rest, nil
	}
	v := opts[end+1:]
	if !strings.HasPrefix(v, `"`) {
		return "", "", false, "", fmt.Errorf("option %q: value must be double-quoted", name)
	}
	var b strings.Builder
	i := 1
	for ; i < len(v) && v[i] != '"'; i++ {
		if v[i] == '\\' && i+1 < len(v) && v[i+1] == '"' {
			i++
		}
		b.WriteByte(v[i])
	}
	if i == len(v) {
		return "", "", false, "", fmt.Errorf("option %q: value has no closing quote", name)
	}
	rest = v[i+1:]
	switch {
	case rest == "":
	case rest[0] != ',':
		return "", "", false, "", fmt.Errorf("option %q: unexpected %q after the value", name, rest)
	case len(rest) == 1:
		return "", "", false, "", errors.New("options end with a comma")
	default:
		rest = rest[1:]
	}
	return name, b.String(), true, rest, nil
}

// parseSSHTime parses YYYYMMDD[HHMM[SS]], in local time unless followed by
// Z or UTC, as ssh-keygen does.
func parseSSHTime(s string) (time.Time, error) {
	loc := time.Local
	v := s
	switch {
	case len(v) > 1 && strings.EqualFold(v[len(v)-1:], "Z"):
		v, loc = v[:len(v)-1], time.UTC
	case len(v) > 3 && strings.EqualFold(v[len(v)-3:], "UTC"):
		v, loc = v[:len(v)-3], time.UTC
	}
	var layout string
	switch len(v) {
	case 8:
		layout = "20060102"
	case 12:
		layout = "200601021504"
	case 14:
		layout = "20060102150405"
	default:
		return time.Time{}, fmt.Errorf("time %q is not YYYYMMDD[HHMM[SS]][Z]", s)
	}
	t, err := time.ParseInLocation(layout, v, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q is not YYYYMMDD[HHMM[SS]][Z]: %w", s, err)
	}
	return t, nil
}

// verify checks an armored SSHSIG signature over payload, committed at
// when, against the allowed signers as they stand now.
func (a *allowedSigners) verify(commit string, payload []byte, armored string, when time.Time) (*Signer, error) {
	sig, err := sshsig.Unarmor([]byte(armored))
	if err != nil {
		return nil, &UnverifiedError{Commit: commit, Reason: "bad signature: cannot parse SSH signature: " + err.Error(), Err: ErrBadSignature}
	}
	fp := ssh.FingerprintSHA256(sig.PublicKey)
	if _, ok := sig.PublicKey.(*ssh.Certificate); ok {
		return nil, &UnverifiedError{Commit: commit, Key: fp, Reason: "signed by SSH certificate " + fp + " which is not trusted: certificates are not supported", Err: ErrUntrusted}
	}
	lines := a.byKey[string(sig.PublicKey.Marshal())]
	if len(lines) == 0 {
		return nil, &UnverifiedError{Commit: commit, Key: fp, Reason: "signed by " + fp + " which is not trusted", Err: ErrUntrusted}
	}
	// The namespace is checked here as well as by sshsig.Verify only to
	// say so plainly.
	if sig.Namespace != gitNamespace {
		return nil, &UnverifiedError{Commit: commit, Key: fp, Reason: fmt.Sprintf("bad signature by key %s: made for namespace %q, not %q", fp, sig.Namespace, gitNamespace), Err: ErrBadSignature}
	}
	if err := sshsig.Verify(bytes.NewReader(payload), sig, sig.PublicKey, sig.HashAlgorithm, gitNamespace); err != nil {
		return nil, &UnverifiedError{Commit: commit, Key: fp, Reason: fmt.Sprintf("bad signature by key %s: %v", fp, err), Err: ErrBadSignature}
	}
	var refused string
	now := time.Now()
	for _, l := range lines {
		why := l.refuses(when, now)
		if why == "" {
			return &Signer{Kind: KindSSH, Fingerprint: fp, Identity: l.principals}, nil
		}
		if refused == "" {
			refused = fmt.Sprintf("%s:%d: %s", a.path, l.line, why)
		}
	}
	return nil, &UnverifiedError{Commit: commit, Key: fp, Reason: fmt.Sprintf("signed by %s which is not trusted for this commit (%s)", fp, refused), Err: ErrUntrusted}
}

// refuses says why the line does not trust its key for a git commit made
// at when and checked now, or "" if it does. Both times must be inside the
// line's validity window: the commit's, as git judges it, and now, since
// the committer sets the commit's time and a key retired by its
// valid-before would otherwise still sign commits dated in its window.
func (s allowedSigner) refuses(when, now time.Time) string {
	if s.namespaces != nil && matchPatternList(gitNamespace, *s.namespaces) != 1 {
		return fmt.Sprintf("namespaces=%q excludes %q", *s.namespaces, gitNamespace)
	}
	if !s.validAfter.IsZero() && when.Before(s.validAfter) {
		return fmt.Sprintf("valid after %s, committed %s", rfc3339(s.validAfter), rfc3339(when))
	}
	if !s.validBefore.IsZero() && when.After(s.validBefore) {
		return fmt.Sprintf("valid before %s, committed %s", rfc3339(s.validBefore), rfc3339(when))
	}
	if !s.validAfter.IsZero() && now.Before(s.validAfter) {
		return fmt.Sprintf("valid after %s, and it is now %s", rfc3339(s.validAfter), rfc3339(now))
	}
	if !s.validBefore.IsZero() && now.After(s.validBefore) {
		return fmt.Sprintf("valid before %s, and it is now %s", rfc3339(s.validBefore), rfc3339(now))
	}
	return ""
}

// rfc3339 writes t in UTC to the second, for messages.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// matchPatternList matches s against a comma-separated list of patterns as
// OpenSSH's match_pattern_list does: 1 if a pattern matches, -1 if a
// negated ("!") pattern matches, which wins, and 0 otherwise.
func matchPatternList(s, list string) int {
	matched := 0
	for p := range strings.SplitSeq(list, ",") {
		negated := strings.HasPrefix(p, "!")
		if negated {
			p = p[1:]
		}
		if !matchPattern(s, p) {
			continue
		}
		if negated {
			return -1
		}
		matched = 1
	}
	return matched
}

// matchPattern matches s against a pattern of literal bytes, "*" (any run)
// and "?" (any one byte).
func matchPattern(s, p string) bool {
	// Backtracking over the last "*" only is enough: a later "*" can always
	// absorb what an earlier one would.
	si, pi := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			si++
			pi++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			mark++
			si, pi = mark, star+1
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
