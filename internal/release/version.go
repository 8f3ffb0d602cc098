package release

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
)

var (
	// notVersionChar is what a commit name may hold that a package
	// version may not.
	notVersionChar = regexp.MustCompile(`[^0-9A-Za-z]+`)
	// describeRE is what git describe prints for a commit after a tag:
	// v1.2.3-4-gabcdef0, maybe with -dirty.
	describeRE = regexp.MustCompile(`^v([0-9]+\.[0-9]+\.[0-9]+)-([0-9]+)-g([0-9a-f]+)(-dirty)?$`)
)

// PackageVersion returns the version packages and archives are named with,
// without a leading v:
//   - for a semantic version tag, the tag's: v1.2.3 gives 1.2.3, v1.2.3-rc.1
//     gives 1.2.3-rc.1;
//   - for a commit after a tag (git describe's v1.2.3-4-gabcdef0), a
//     pre-release of the next patch that sorts after the tag and by commit
//     time: 1.2.4-0.git.20261127204407.4.gabcdef0;
//   - else a pre-release of 0.0.0: 0.0.0-git.20261127204407.afa3531.
//
// deb writes a pre-release with ~ (0.0.0~git...), rpm likewise, so that it
// sorts below the release.
func PackageVersion(version, commit string, at time.Time) (string, error) {
	stamp := at.UTC().Format("20060102150405")
	var v string
	if m := describeRE.FindStringSubmatch(version); m != nil {
		tag, err := semver.StrictNewVersion(m[1])
		if err != nil {
			return "", fmt.Errorf("release: version %q: %w", version, err)
		}
		v = fmt.Sprintf("%s-0.git.%s.%s.g%s", tag.IncPatch().String(), stamp, m[2], m[3])
		if m[4] != "" {
			v += ".dirty"
		}
	} else if rest, ok := strings.CutPrefix(version, "v"); ok && validSemver(rest) {
		return rest, nil
	} else {
		name := version
		if name == "" || name == "devel" {
			name = commit
		}
		var ids []string
		for _, id := range notVersionChar.Split(name, -1) {
			switch {
			case id == "":
				continue
			case len(id) > 1 && id[0] == '0' && strings.Trim(id, "0123456789") == "":
				id = "g" + id // a number may not start with 0
			}
			ids = append(ids, id)
		}
		if len(ids) == 0 {
			return "", fmt.Errorf("release: version %q and commit %q name nothing a package version can hold", version, commit)
		}
		v = "0.0.0-git." + stamp + "." + strings.Join(ids, ".")
	}
	if !validSemver(v) {
		return "", fmt.Errorf("release: version %q gives %q, not a semantic version", version, v)
	}
	return v, nil
}

func validSemver(s string) bool {
	_, err := semver.StrictNewVersion(s)
	return err == nil
}
