package release

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// Where the packages install their files.
const (
	BinaryPath     = "/usr/bin/" + Name
	ConfigDir      = "/etc/no8s"
	ConfigPath     = ConfigDir + "/no8s.yaml"
	EnvPath        = ConfigDir + "/no8s.env"
	UnitPath       = "/usr/lib/systemd/system/" + Name + ".service"
	ManifestsDir   = "/etc/no8s/manifests"
	BashCompletion = "/usr/share/bash-completion/completions/" + Name
	FishCompletion = "/usr/share/fish/vendor_completions.d/" + Name + ".fish"
	// Debian's zsh looks in vendor-completions, Fedora's and RHEL's in
	// site-functions.
	ZshCompletionDeb = "/usr/share/zsh/vendor-completions/_" + Name
	ZshCompletionRPM = "/usr/share/zsh/site-functions/_" + Name
	// User is the system user the service runs as, made by the
	// preinstall script; its group of the same name may read ConfigDir.
	User = "no8s"
)

// writePackage writes the deb or rpm package (format) of the linux binary
// bin for t into the output folder, and returns its path.
func writePackage(o Options, format string, t Target, version, bin string, comp map[string][]byte, s *static) (string, error) {
	compDir := filepath.Join(o.Out, "build", "completions")
	if err := os.MkdirAll(compDir, 0o755); err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	compFile := map[string]string{}
	for _, c := range completionShells {
		p := filepath.Join(compDir, c.File)
		if err := os.WriteFile(p, comp[c.Shell], 0o644); err != nil {
			return "", fmt.Errorf("release: %w", err)
		}
		compFile[c.Shell] = p
	}
	src := func(f staticFile) string { return filepath.Join(o.Dir, f.Path) }
	fi := func(mode os.FileMode, owner, group string) *files.ContentFileInfo {
		return &files.ContentFileInfo{Mode: mode, Owner: owner, Group: group, MTime: o.Time}
	}
	zsh := ZshCompletionDeb
	if format == "rpm" {
		zsh = ZshCompletionRPM
	}
	info := &nfpm.Info{
		Name:        Name,
		Arch:        t.Arch,
		Platform:    t.OS,
		Version:     version,
		Release:     "1",
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  o.Maintainer,
		Vendor:      "no8s",
		Homepage:    "https://github.com/no8s/no8s-agent",
		Description: "GitOps agent for infrastructure without Kubernetes\nWatches manifests in Git or a folder, validates them against schemas kept in\nGit, records each change in PostgreSQL and drives the world toward it through\nactions (GitHub Actions, HTTP, commands, Terraform). Runs as the systemd\nservice no8s-agent.",
		// Every path is written out: nothing is a pattern.
		DisableGlobbing: true,
		MTime:           o.Time,
		Overridables: nfpm.Overridables{
			Contents: files.Contents{
				{Source: bin, Destination: BinaryPath, FileInfo: fi(0o755, "root", "root")},
				{Destination: ConfigDir, Type: files.TypeDir, FileInfo: fi(0o750, "root", User)},
				// An upgrade keeps the administrator's copies (deb
				// conffiles, rpm %config(noreplace)).
				{Source: src(s.Config), Destination: ConfigPath, Type: files.TypeConfigNoReplace, FileInfo: fi(0o640, "root", User)},
				// Secrets: systemd reads the file as root before it
				// starts the agent, and neither the agent's user nor the
				// commands its actions run may read it.
				{Source: src(s.Env), Destination: EnvPath, Type: files.TypeConfigNoReplace, FileInfo: fi(0o600, "root", "root")},
				{Source: src(s.Unit), Destination: UnitPath, FileInfo: fi(0o644, "root", "root")},
				{Destination: "/var/lib/no8s", Type: files.TypeDir, FileInfo: fi(0o750, User, User)},
				// The agent reads its manifests and may not write them:
				// an action's command, which runs as the agent's user,
				// could otherwise declare resources no review saw. Its
				// parent is root's, so it cannot be replaced either.
				{Destination: ManifestsDir, Type: files.TypeDir, FileInfo: fi(0o750, "root", User)},
				{Source: compFile["bash"], Destination: BashCompletion, FileInfo: fi(0o644, "root", "root")},
				{Source: compFile["fish"], Destination: FishCompletion, FileInfo: fi(0o644, "root", "root")},
				{Source: compFile["zsh"], Destination: zsh, FileInfo: fi(0o644, "root", "root")},
			},
			Scripts: nfpm.Scripts{
				PreInstall:  s.Scripts["preinstall"],
				PostInstall: s.Scripts["postinstall"],
				PreRemove:   s.Scripts["preremove"],
				PostRemove:  s.Scripts["postremove"],
			},
			RPM: nfpm.RPM{
				Summary:  "GitOps agent for infrastructure without Kubernetes",
				Group:    "System Environment/Daemons",
				Packager: o.Maintainer,
				// The build host is part of the package; a fixed one
				// keeps it reproducible.
				BuildHost: "no8s-release",
			},
		},
	}
	for _, d := range s.Docs {
		info.Contents = append(info.Contents, &files.Content{Source: src(d),
			Destination: "/usr/share/doc/" + Name + "/" + filepath.Base(d.Path), FileInfo: fi(0o644, "root", "root")})
	}
	info = nfpm.WithDefaults(info)
	p, err := nfpm.Get(format)
	if err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	out := filepath.Join(o.Out, p.ConventionalFileName(info))
	f, err := os.Create(out)
	if err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	if err := p.Package(info, f); err != nil {
		f.Close()
		return "", fmt.Errorf("release: %s package for %s: %w", format, t, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	return out, nil
}
