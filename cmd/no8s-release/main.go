// Command no8s-release builds the agent's release files into a folder:
// archives, SBOMs, deb and rpm packages and checksums.txt. `make dist` runs
// it with the checkout's version, commit and commit time:
//
//	no8s-release -out dist -version v1.2.3 -commit <hash> -date 2026-11-27T20:44:07Z
//
// The work is internal/release's; this is its command line.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/no8s/no8s-agent/internal/release"
	"github.com/no8s/no8s-agent/internal/release/ociimage"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "no8s-release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("no8s-release", flag.ContinueOnError)
	out := fs.String("out", "dist", "folder to write the release files to (must not exist or be empty)")
	dir := fs.String("dir", ".", "the module's root: the folder holding go.mod and packaging/")
	version := fs.String("version", "", "the version the binary prints: a tag like v1.2.3, or the commit's name")
	commit := fs.String("commit", "", "the full commit hash")
	date := fs.String("date", "", "the commit's time, RFC 3339 (default: SOURCE_DATE_EPOCH)")
	targets := fs.String("targets", "", "comma-separated GOOS/GOARCH pairs (default: linux and darwin on amd64 and arm64)")
	maintainer := fs.String("maintainer", "", "the packages' maintainer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	at, err := commitTime(*date)
	if err != nil {
		return err
	}
	o := release.Options{
		Dir: *dir, Out: *out, Version: *version, Commit: *commit, Time: at, Maintainer: *maintainer,
		Log:   slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Image: containerImage(*version, *commit, at),
	}
	if *targets != "" {
		if o.Targets, err = release.ParseTargets(*targets); err != nil {
			return fmt.Errorf("-targets: %w", err)
		}
	}
	res, err := release.Build(ctx, o)
	if err != nil {
		return err
	}
	var files []string
	for _, m := range []map[string]string{res.Archives, res.SBOMs, res.Packages} {
		for _, f := range m {
			files = append(files, f)
		}
	}
	files = append(files, res.Images...)
	sort.Strings(files)
	for _, f := range append(files, res.Checksums) {
		fmt.Println(f)
	}
	return nil
}

// containerImage writes the image of the linux binaries: a
// multi-architecture OCI layout, as a folder and as a tar, and a
// docker-archive tar per architecture, tagged with the version.
func containerImage(version, commit string, at time.Time) release.ImageFunc {
	return func(ctx context.Context, binaries map[string]string, out, base string) ([]string, error) {
		o := ociimage.Options{
			Version: version, Revision: commit, Created: at,
			LayoutDir:  filepath.Join(out, base+"_oci"),
			LayoutTar:  filepath.Join(out, base+"_oci.tar"),
			DockerTars: map[string]string{},
		}
		for _, arch := range slices.Sorted(maps.Keys(binaries)) {
			o.Binaries = append(o.Binaries, ociimage.Binary{Arch: arch, Path: binaries[arch]})
			o.DockerTars[arch] = filepath.Join(out, base+"_linux_"+arch+".docker.tar")
		}
		res, err := ociimage.Write(ctx, o)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "image %s: index %s\n", res.Ref, res.Index)
		return append([]string{o.LayoutTar}, slices.Collect(maps.Values(o.DockerTars))...), nil
	}
}

// commitTime parses -date, or SOURCE_DATE_EPOCH when -date is empty.
func commitTime(date string) (time.Time, error) {
	if date != "" {
		t, err := time.Parse(time.RFC3339, date)
		if err != nil {
			return time.Time{}, fmt.Errorf("-date: %w", err)
		}
		return t, nil
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		return time.Unix(n, 0), nil
	}
	return time.Time{}, fmt.Errorf("no commit time: give -date or set SOURCE_DATE_EPOCH")
}
