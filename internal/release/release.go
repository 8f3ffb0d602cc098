// Package release builds the agent's release files from a checkout: static
// binaries for each platform, tar.gz archives with shell completions and the
// default configuration, a CycloneDX SBOM per binary, deb and rpm packages
// with a hardened systemd unit, and checksums.txt over all of them.
//
// Everything is made from the module's sources, the module cache and the
// files in packaging/, without a network or a container daemon, and
// reproducibly: the same commit and toolchain give the same bytes (paths
// trimmed, every timestamp the commit's, archive entries sorted).
package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Name is the agent's name: its binary, its packages and its archives'.
const Name = "no8s-agent"

// Target is a platform to build for.
type Target struct {
	OS   string // GOOS: linux or darwin
	Arch string // GOARCH: amd64 or arm64
}

func (t Target) String() string { return t.OS + "/" + t.Arch }

// ParseTargets reads a comma-separated list of GOOS/GOARCH pairs, such as
// "linux/amd64,darwin/arm64".
func ParseTargets(s string) ([]Target, error) {
	var out []Target
	for _, pair := range strings.Split(s, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(pair), "/")
		t := Target{goos, goarch}
		if !ok || !slices.Contains(DefaultTargets, t) {
			return nil, fmt.Errorf("%q is not one of linux and darwin on amd64 and arm64, written GOOS/GOARCH", pair)
		}
		out = append(out, t)
	}
	return out, nil
}

// DefaultTargets are the platforms a release is built for.
var DefaultTargets = []Target{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
}

// ImageFunc writes the container image of the linux binaries, given by
// GOARCH, into the output folder out, in files whose names start with base
// (the archives' prefix, such as "no8s-agent_1.2.3"). One call gets every
// architecture, so that the image is one multi-architecture index. Files
// it leaves directly in out are listed in checksums.txt with the others;
// it returns the files it wrote there.
type ImageFunc func(ctx context.Context, binaries map[string]string, out, base string) ([]string, error)

// Options says what to build and from where.
type Options struct {
	// Dir is the module's root: the folder holding go.mod and packaging/.
	Dir string
	// Out is the folder the release files go to. It must not exist or be
	// empty, so that checksums.txt lists only this build's files.
	Out string
	// Version is what the binary's version command prints: a tag such as
	// v1.2.3, or a commit's name when the commit has no tag. Packages and
	// archives take their version from it (see PackageVersion).
	Version string
	// Commit is the full commit hash stamped into the binary.
	Commit string
	// Time is the commit's time: the binary's build date and the
	// modification time of every file in the archives and packages.
	Time time.Time
	// Targets are the platforms; nil means DefaultTargets.
	Targets []Target
	// Go is the go command; empty means "go" on PATH.
	Go string
	// Maintainer is the packages' Maintainer (deb) and Packager (rpm).
	Maintainer string
	// Image, when set, writes the container image of each linux binary
	// after the packages are built. Nil leaves images out.
	Image ImageFunc
	// Log receives progress; nil discards it.
	Log *slog.Logger
}

// Result names the files a release build wrote, as paths under Options.Out.
type Result struct {
	// Binaries are the built binaries, by target ("linux/amd64").
	Binaries map[string]string
	// Archives are the tar.gz archives, by target.
	Archives map[string]string
	// SBOMs are the CycloneDX documents, by target.
	SBOMs map[string]string
	// Packages are the deb and rpm packages, by target and format
	// ("linux/amd64 deb").
	Packages map[string]string
	// Images are the container image's files, as the ImageFunc named them.
	Images []string
	// Checksums is checksums.txt.
	Checksums string
}

// Build makes every release file of o into o.Out.
func Build(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := emptyDir(o.Out); err != nil {
		return nil, err
	}
	pv, err := PackageVersion(o.Version, o.Commit, o.Time)
	if err != nil {
		return nil, err
	}
	targets := o.Targets
	if targets == nil {
		targets = DefaultTargets
	}
	res := &Result{Binaries: map[string]string{}, Archives: map[string]string{}, SBOMs: map[string]string{},
		Packages: map[string]string{}}

	for _, t := range targets {
		bin := filepath.Join(o.Out, "build", t.OS+"_"+t.Arch, Name)
		log.Info("building", "target", t.String())
		if err := buildBinary(ctx, o, t, bin); err != nil {
			return nil, err
		}
		res.Binaries[t.String()] = bin
	}

	// Completions come from the agent itself: its cobra command tree.
	host, cleanup, err := hostBinary(ctx, o, res.Binaries)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	comp, err := completions(ctx, host)
	if err != nil {
		return nil, err
	}

	static, err := readStatic(o.Dir)
	if err != nil {
		return nil, err
	}
	for _, t := range targets {
		base := fmt.Sprintf("%s_%s_%s_%s", Name, pv, t.OS, t.Arch)
		archive := filepath.Join(o.Out, base+".tar.gz")
		log.Info("archiving", "target", t.String(), "file", filepath.Base(archive))
		if err := writeArchive(archive, base, archiveFiles(res.Binaries[t.String()], t, comp, static), o.Time); err != nil {
			return nil, err
		}
		res.Archives[t.String()] = archive

		sbom := filepath.Join(o.Out, base+".sbom.cdx.json")
		log.Info("writing the SBOM", "target", t.String(), "file", filepath.Base(sbom))
		if err := writeSBOM(ctx, o, res.Binaries[t.String()], sbom); err != nil {
			return nil, err
		}
		res.SBOMs[t.String()] = sbom
	}

	for _, t := range targets {
		if t.OS != "linux" {
			continue
		}
		for _, format := range []string{"deb", "rpm"} {
			log.Info("packaging", "target", t.String(), "format", format)
			p, err := writePackage(o, format, t, pv, res.Binaries[t.String()], comp, static)
			if err != nil {
				return nil, err
			}
			res.Packages[t.String()+" "+format] = p
		}
	}

	// The container image step: Options.Image, when the command wires it.
	linux := map[string]string{}
	for _, t := range targets {
		if t.OS == "linux" {
			linux[t.Arch] = res.Binaries[t.String()]
		}
	}
	if o.Image != nil && len(linux) > 0 {
		log.Info("writing the container image", "architectures", len(linux))
		if res.Images, err = o.Image(ctx, linux, o.Out, Name+"_"+pv); err != nil {
			return nil, fmt.Errorf("container image: %w", err)
		}
	}

	res.Checksums = filepath.Join(o.Out, "checksums.txt")
	if err := writeChecksums(o.Out, res.Checksums); err != nil {
		return nil, err
	}
	return res, nil
}

func (o *Options) check() error {
	switch {
	case o.Dir == "":
		return errors.New("release: no module folder")
	case o.Out == "":
		return errors.New("release: no output folder")
	case o.Version == "":
		return errors.New("release: no version")
	case o.Time.IsZero():
		return errors.New("release: no commit time")
	}
	for _, t := range o.Targets {
		if !slices.Contains(DefaultTargets, t) {
			return fmt.Errorf("release: target %s is not one of linux and darwin on amd64 and arm64", t)
		}
	}
	o.Time = o.Time.UTC().Truncate(time.Second)
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Maintainer == "" {
		o.Maintainer = "no8s-agent maintainers"
	}
	return nil
}

// emptyDir makes dir, or checks that it is empty.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return fmt.Errorf("release: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("release: output folder %s is not empty: remove it first", dir)
	}
	return nil
}

// hostBinary returns a binary this machine runs: the built one for its
// platform, or one built for it into a temporary folder.
func hostBinary(ctx context.Context, o Options, built map[string]string) (string, func(), error) {
	host := Target{runtime.GOOS, runtime.GOARCH}
	if b, ok := built[host.String()]; ok {
		return b, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "no8s-release-")
	if err != nil {
		return "", nil, fmt.Errorf("release: %w", err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	bin := filepath.Join(dir, Name)
	if err := buildBinary(ctx, o, host, bin); err != nil {
		cleanup()
		return "", nil, err
	}
	return bin, cleanup, nil
}
