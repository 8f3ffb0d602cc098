// Package ociimage builds the agent's container image without a Docker
// daemon and without pulling a base image: from scratch, a layer of base
// files (CA certificates, a passwd and group naming the non-root user the
// agent runs as, its state folder) and a layer holding the static agent
// binary. There is no shell, no package manager and no libc in it: the image
// weighs a few hundred kilobytes more than the binary.
//
// Write produces, from one linux binary per architecture:
//   - a multi-architecture OCI image layout (an image index of the
//     linux/amd64 and linux/arm64 images), as a folder and as a tar, which
//     podman load, skopeo and Docker 25 or later accept;
//   - one docker-archive tar per architecture (manifest.json and its
//     blobs), which every docker load and podman load accept.
//
// Every timestamp in the image is the time given in Options (the commit's),
// so that two builds of the same commit with the same toolchain give the
// same digests.
package ociimage

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image holds and how it runs. Deployment files (compose, the
// docs) refer to these.
const (
	// Repository is the name the image is tagged with.
	Repository = "ghcr.io/no8s/no8s-agent"
	// LatestTag is the moving tag given with the version by default.
	LatestTag = "latest"
	// BinaryPath is where the agent binary is in the image; it is the
	// entrypoint.
	BinaryPath = "/usr/bin/no8s-agent"
	// ConfigPath is the configuration file the default command runs with:
	// mount one there.
	ConfigPath = "/etc/no8s/no8s.yaml"
	// StateDir is the working folder, owned by the agent's user: the
	// embedded store (.no8s/state.db) and the Git clones (.no8s/cache) go
	// under it unless the configuration says otherwise. Mount a volume
	// there.
	StateDir = "/var/lib/no8s"
	// UserName, UID and GID are the non-root user the agent runs as
	// (65532, as distroless's nonroot).
	UserName = "no8s"
	UID      = 65532
	GID      = 65532
	// Port is the API and dashboard port the image exposes; the
	// configuration's listen address must use it, on 0.0.0.0 or [::]
	// (the default 127.0.0.1 is unreachable from outside a container).
	Port = 8080
	// CACertPath is where the CA bundle is in the image: the path Go (and
	// most TLS libraries on Debian-like systems) look at first.
	CACertPath = "/etc/ssl/certs/ca-certificates.crt"
	// DefaultCACertFile is the bundle taken from the building machine:
	// the file Debian's ca-certificates package maintains.
	DefaultCACertFile = "/etc/ssl/certs/ca-certificates.crt"
	// DefaultSource is the org.opencontainers.image.source label when
	// Options.Source is empty.
	DefaultSource = "https://github.com/no8s/no8s-agent"
)

// DefaultCommand is the image's command (arguments to the entrypoint).
var DefaultCommand = []string{"run", "--config", ConfigPath}

// Binary is a static linux agent binary for one architecture.
type Binary struct {
	// Arch is a GOARCH: amd64 or arm64.
	Arch string
	// Path is the binary's file.
	Path string
}

// Options say what to build and where to write it.
type Options struct {
	// Binaries are the agent binaries, one per architecture; each must be
	// a static linux ELF executable for its Arch (CGO_ENABLED=0).
	Binaries []Binary
	// Version is the image's version label and first tag (a valid Docker
	// tag: letters, digits, '_', '.', '-').
	Version string
	// Revision is the commit the binaries were built from.
	Revision string
	// Created is the commit's time: the image's creation time and the
	// time of every file in it. Zero means the Unix epoch.
	Created time.Time
	// Source is the repository URL for the source label; empty means
	// DefaultSource.
	Source string
	// Repository is the image name without a tag; empty means Repository.
	Repository string
	// Tags tag the docker-archive tars; empty means Version and LatestTag.
	// The OCI layout names the image with the first one.
	Tags []string
	// CACertFile is the CA bundle copied into the image; empty means
	// DefaultCACertFile.
	CACertFile string
	// CompressionLevel is the gzip level of the layers, from
	// gzip.BestSpeed to gzip.BestCompression; zero means
	// gzip.DefaultCompression. The digests depend on it.
	CompressionLevel int

	// LayoutDir, when set, receives the multi-architecture OCI image
	// layout. An existing folder there must be empty or an earlier layout,
	// which is replaced.
	LayoutDir string
	// LayoutTar, when set, receives the same layout as a tar.
	LayoutTar string
	// DockerTars, when set, map an architecture to the docker-archive tar
	// written for it; every key must be one of the Binaries' Arch.
	DockerTars map[string]string
}

// Result describes the image written.
type Result struct {
	// Index is the digest of the multi-architecture image index.
	Index v1.Hash
	// Images are the digests of the images, by architecture.
	Images map[string]v1.Hash
	// Ref is the reference the OCI layout names the index with.
	Ref string
}

// archVariant maps the architectures built to their OCI platform variant.
var archVariant = map[string]string{"amd64": "", "arm64": "v8"}

// elfMachine maps the architectures built to their ELF machine.
var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// Write builds the image and writes the outputs Options name.
func Write(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	created := o.Created.UTC().Truncate(time.Second)
	if o.Created.IsZero() {
		created = time.Unix(0, 0).UTC()
	}
	repo := cmp.Or(o.Repository, Repository)
	tags := o.Tags
	if len(tags) == 0 {
		tags = []string{o.Version, LatestTag}
	}
	refs := make([]name.Tag, 0, len(tags))
	for _, t := range tags {
		ref, err := name.NewTag(repo+":"+t, name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("image tag %q: %w", t, err)
		}
		refs = append(refs, ref)
	}

	caFile := cmp.Or(o.CACertFile, DefaultCACertFile)
	ca, err := os.ReadFile(caFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("CA certificates: %s not found: install them (Debian: apt-get install ca-certificates)", caFile)
	}
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("CA certificates: %s holds no PEM certificate", caFile)
	}
	level := cmp.Or(o.CompressionLevel, gzip.DefaultCompression)
	base, err := gzipLayer(baseFiles(ca), created, level)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}

	labels := map[string]string{
		"org.opencontainers.image.title":       "no8s-agent",
		"org.opencontainers.image.description": "A GitOps agent without Kubernetes",
		"org.opencontainers.image.source":      cmp.Or(o.Source, DefaultSource),
		"org.opencontainers.image.url":         cmp.Or(o.Source, DefaultSource),
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}
	res := &Result{Images: map[string]v1.Hash{}, Ref: refs[0].String()}
	images := map[string]v1.Image{}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	bins := slices.SortedFunc(slices.Values(o.Binaries), func(a, b Binary) int { return cmp.Compare(a.Arch, b.Arch) })
	for _, b := range bins {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		img, err := archImage(b, base, labels, created, level)
		if err != nil {
			return nil, fmt.Errorf("linux/%s image: %w", b.Arch, err)
		}
		d, err := img.Digest()
		if err != nil {
			return nil, fmt.Errorf("linux/%s image: %w", b.Arch, err)
		}
		images[b.Arch], res.Images[b.Arch] = img, d
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: b.Arch, Variant: archVariant[b.Arch]},
		}})
	}
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	if res.Index, err = idx.Digest(); err != nil {
		return nil, fmt.Errorf("image index: %w", err)
	}

	for _, arch := range slices.Sorted(maps.Keys(o.DockerTars)) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := writeDockerTar(o.DockerTars[arch], images[arch], refs, created); err != nil {
			return nil, fmt.Errorf("docker archive for linux/%s: %w", arch, err)
		}
	}
	if o.LayoutDir == "" && o.LayoutTar == "" {
		return res, nil
	}
	// The layout's index.json names the multi-architecture index with the
	// first tag: org.opencontainers.image.ref.name for podman and skopeo,
	// io.containerd.image.name for Docker (25 or later, containerd's
	// importer). One entry only: podman refuses to guess among several.
	top := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{
		Add: idx,
		Descriptor: v1.Descriptor{Annotations: map[string]string{
			"org.opencontainers.image.ref.name": refs[0].String(),
			"io.containerd.image.name":          refs[0].String(),
		}},
	})
	dir := o.LayoutDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "no8s-oci-layout-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = filepath.Join(tmp, "layout")
	}
	if err := writeLayout(dir, top); err != nil {
		return nil, fmt.Errorf("OCI layout: %w", err)
	}
	if o.LayoutTar != "" {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := tarFolder(o.LayoutTar, dir, created); err != nil {
			return nil, fmt.Errorf("OCI layout tar: %w", err)
		}
	}
	return res, nil
}

// check reports what is wrong with o before anything is built.
func (o Options) check() error {
	if o.Version == "" {
		return errors.New("image: no version")
	}
	if o.CompressionLevel < 0 || o.CompressionLevel > gzip.BestCompression {
		return fmt.Errorf("image: compression level %d: want 1 to 9, or 0 for the default", o.CompressionLevel)
	}
	if len(o.Binaries) == 0 {
		return errors.New("image: no binaries")
	}
	seen := map[string]bool{}
	for _, b := range o.Binaries {
		if _, ok := archVariant[b.Arch]; !ok {
			return fmt.Errorf("image: architecture %q: only amd64 and arm64 are built", b.Arch)
		}
		if seen[b.Arch] {
			return fmt.Errorf("image: two binaries for %s", b.Arch)
		}
		seen[b.Arch] = true
		if err := checkStatic(b); err != nil {
			return err
		}
	}
	for arch := range o.DockerTars {
		if !seen[arch] {
			return fmt.Errorf("image: docker archive asked for %s, which has no binary", arch)
		}
	}
	if o.LayoutDir != "" {
		entries, err := os.ReadDir(o.LayoutDir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("image: %w", err)
		}
		if len(entries) > 0 {
			if _, err := os.Stat(filepath.Join(o.LayoutDir, "oci-layout")); err != nil {
				return fmt.Errorf("image: %s exists and is not an OCI layout: remove it or choose another folder", o.LayoutDir)
			}
		}
	}
	return nil
}

// checkStatic makes sure the binary will run in an image without libc or a
// dynamic loader, on the architecture it is labelled for.
func checkStatic(b Binary) error {
	f, err := elf.Open(b.Path)
	if err != nil {
		return fmt.Errorf("image: binary for %s: %w", b.Arch, err)
	}
	defer f.Close()
	if f.Machine != elfMachine[b.Arch] {
		return fmt.Errorf("image: binary %s is for %s, not %s", b.Path, f.Machine, b.Arch)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("image: binary %s is not an executable (%s)", b.Path, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("image: binary %s is dynamically linked: the image has no libc; build it with CGO_ENABLED=0", b.Path)
		}
	}
	return nil
}

// archImage is the image of one architecture: the base layer, the binary's
// layer and the configuration.
func archImage(b Binary, base v1.Layer, labels map[string]string, created time.Time, level int) (v1.Image, error) {
	bin, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, err
	}
	binLayer, err := gzipLayer([]entry{
		dir("usr/", 0o755, 0, 0), dir("usr/bin/", 0o755, 0, 0),
		file(BinaryPath[1:], 0o755, 0, 0, bin),
	}, created, level)
	if err != nil {
		return nil, fmt.Errorf("binary layer: %w", err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	at := v1.Time{Time: created}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: at,
			CreatedBy: "no8s-agent release: CA certificates, passwd and group (user " + UserName + "), " + StateDir}},
		mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer, History: v1.History{Created: at,
			CreatedBy: "no8s-agent release: " + BinaryPath}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = at
	cf.OS, cf.Architecture, cf.Variant = "linux", b.Arch, archVariant[b.Arch]
	cf.Author = ""
	cf.Config = v1.Config{
		User:       strconv.Itoa(UID) + ":" + strconv.Itoa(GID),
		Entrypoint: []string{BinaryPath},
		Cmd:        slices.Clone(DefaultCommand),
		WorkingDir: StateDir,
		// The exec plugin passes PATH and HOME to the commands it runs.
		// Go finds the CA bundle at CACertPath without SSL_CERT_FILE.
		Env:          []string{"PATH=/usr/bin", "HOME=" + StateDir},
		ExposedPorts: map[string]struct{}{strconv.Itoa(Port) + "/tcp": {}},
		Labels:       labels,
		StopSignal:   "SIGTERM",
	}
	return mutate.ConfigFile(img, cf)
}

// An entry is a file or folder of a layer.
type entry struct {
	hdr  tar.Header
	data []byte
}

func dir(name string, mode int64, uid, gid int) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: uid, Gid: gid}}
}

func file(name string, mode int64, uid, gid int, data []byte) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Uid: uid, Gid: gid, Size: int64(len(data))}, data: data}
}

// baseFiles are the files every architecture shares, so that their layer is
// one blob.
func baseFiles(ca []byte) []entry {
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		fmt.Sprintf("%s:x:%d:%d:no8s-agent:%s:/sbin/nologin\n", UserName, UID, GID, StateDir)
	group := "root:x:0:\n" + fmt.Sprintf("%s:x:%d:\n", UserName, GID)
	return []entry{
		dir("etc/", 0o755, 0, 0),
		file("etc/group", 0o644, 0, 0, []byte(group)),
		// Go's resolver reads it: names from /etc/hosts first, as glibc
		// systems do, rather than its default without the file (DNS first).
		file("etc/nsswitch.conf", 0o644, 0, 0, []byte("hosts: files dns\n")),
		dir("etc/no8s/", 0o755, 0, 0),
		file("etc/passwd", 0o644, 0, 0, []byte(passwd)),
		dir("etc/ssl/", 0o755, 0, 0),
		dir("etc/ssl/certs/", 0o755, 0, 0),
		file(CACertPath[1:], 0o644, 0, 0, ca),
		dir("tmp/", 0o1777, 0, 0),
		dir("var/", 0o755, 0, 0),
		dir("var/lib/", 0o755, 0, 0),
		dir(StateDir[1:]+"/", 0o750, UID, GID),
	}
}

// gzipLayer makes a layer of entries, every one dated at created. The
// compressed blob is kept in memory: it is read for its digest, the layout
// and every docker archive.
func gzipLayer(entries []entry, created time.Time, level int) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := map[int]string{0: "root", UID: UserName}
	for _, e := range entries {
		h := e.hdr
		h.ModTime, h.Uname, h.Gname, h.Format = created, names[h.Uid], names[h.Gid], tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(level), tarball.WithCompressedCaching)
}

// writeDockerTar writes img as a docker-archive tagged with refs. It is
// go-containerregistry's tarball format written in a fixed order (its own
// writer orders several tags as a map does), so that the tar is as
// reproducible as the image.
func writeDockerTar(dst string, img v1.Image, refs []name.Tag, created time.Time) error {
	byRef := map[name.Reference]v1.Image{}
	for _, r := range refs {
		byRef[r] = img
	}
	m, err := tarball.ComputeManifest(byRef)
	if err != nil {
		return err
	}
	if len(m) != 1 {
		return fmt.Errorf("docker archive: %d manifests for one image", len(m))
	}
	slices.Sort(m[0].RepoTags)
	manifest, err := json.Marshal(m)
	if err != nil {
		return err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if len(layers) != len(m[0].Layers) {
		return fmt.Errorf("docker archive: %d layers, %d in manifest.json", len(layers), len(m[0].Layers))
	}
	return writeTarFile(dst, func(tw *tar.Writer) error {
		if err := tarEntry(tw, m[0].Config, created, bytes.NewReader(cfg), int64(len(cfg))); err != nil {
			return err
		}
		if m[0].Config != cfgName.String() {
			return fmt.Errorf("docker archive: config %s named %s", cfgName, m[0].Config)
		}
		for i, l := range layers {
			if err := tarLayer(tw, m[0].Layers[i], l, created); err != nil {
				return err
			}
		}
		return tarEntry(tw, "manifest.json", created, bytes.NewReader(manifest), int64(len(manifest)))
	})
}

func tarLayer(tw *tar.Writer, name string, l v1.Layer, created time.Time) error {
	size, err := l.Size()
	if err != nil {
		return err
	}
	r, err := l.Compressed()
	if err != nil {
		return err
	}
	defer r.Close()
	return tarEntry(tw, name, created, r, size)
}

func tarEntry(tw *tar.Writer, name string, created time.Time, r io.Reader, size int64) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: created, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := io.Copy(tw, r)
	return err
}

// writeLayout writes ii as an OCI image layout at dir, replacing an
// earlier layout there (check made sure that is all there is).
func writeLayout(dir string, ii v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	_, err := layout.Write(dir, ii)
	return err
}

// tarFolder writes the files under dir, in lexical order and dated at
// created, to the tar dst.
func tarFolder(dst, dir string, created time.Time) error {
	return writeTarFile(dst, func(tw *tar.Writer) error {
		// WalkDir visits in lexical order.
		return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == dir {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: path.Clean(rel) + "/", Mode: 0o755, ModTime: created, Format: tar.FormatPAX})
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s: not a regular file", p)
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return err
			}
			return tarEntry(tw, rel, created, f, st.Size())
		})
	})
}

// writeTarFile writes a tar with fill, in place of dst only once complete.
func writeTarFile(dst string, fill func(*tar.Writer) error) (err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	tw := tar.NewWriter(f)
	if err := fill(tw); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), dst)
}
