package ociimage_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/no8s/no8s-agent/internal/release/ociimage"
)

const (
	testVersion = "v0.0.0-imagetest"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
	// maxOverhead bounds what the image adds to the binary.
	maxOverhead = 3 << 20
)

var (
	// agentBin is the agent built for linux on this machine's
	// architecture; stubBin a static program for the other one, and
	// hostStub one for this one.
	agentBin, stubBin, hostStub string
	hostArch, other             string
	created                     = time.Date(2026, 11, 20, 9, 30, 15, 0, time.UTC)
)

// TestMain builds the binaries once for every test.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ociimage-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	hostArch, other = runtime.GOARCH, "arm64"
	if hostArch == "arm64" {
		other = "amd64"
	}
	if hostArch != "amd64" && hostArch != "arm64" {
		fmt.Fprintf(os.Stderr, "images are built for amd64 and arm64, not %s\n", hostArch)
		return 1
	}
	agentBin, stubBin, hostStub = filepath.Join(dir, "no8s-agent"), filepath.Join(dir, "stub"), filepath.Join(dir, "host-stub")
	builds := []struct{ arch, out, pkg, ldflags string }{
		{hostArch, agentBin, "../../../cmd/no8s-agent", "-s -w -X main.version=" + testVersion + " -X main.commit=" + testCommit},
		{other, stubBin, "./testdata/stub", ""},
		{hostArch, hostStub, "./testdata/stub", ""},
	}
	for _, b := range builds {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", b.ldflags, "-o", b.out, b.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+b.arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s for linux/%s: %v\n%s", b.pkg, b.arch, err, out)
			return 1
		}
	}
	return m.Run()
}

// options are the build every test starts from, writing under dir.
func options(dir string) ociimage.Options {
	return ociimage.Options{
		Binaries: []ociimage.Binary{{Arch: hostArch, Path: agentBin}, {Arch: other, Path: stubBin}},
		Version:  testVersion,
		Revision: testCommit,
		Created:  created,
		// The fastest: the tests read every layer back, under the race
		// detector too; the level changes nothing else.
		CompressionLevel: gzip.BestSpeed,
		LayoutDir:        filepath.Join(dir, "oci"),
		LayoutTar:        filepath.Join(dir, "oci.tar"),
		DockerTars:       map[string]string{hostArch: filepath.Join(dir, "docker.tar")},
	}
}

func TestImage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := options(dir)
	res, err := ociimage.Write(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	wantRef := ociimage.Repository + ":" + testVersion
	if res.Ref != wantRef {
		t.Errorf("ref %q, want %q", res.Ref, wantRef)
	}

	// The layout: index.json names one multi-architecture index.
	lp, err := layout.FromPath(opts.LayoutDir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want the one index", len(topManifest.Manifests))
	}
	d := topManifest.Manifests[0]
	if d.Digest != res.Index || d.Annotations["org.opencontainers.image.ref.name"] != wantRef || d.Annotations["io.containerd.image.name"] != wantRef {
		t.Errorf("index.json entry %+v, want %s named %s", d, res.Index, wantRef)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range im.Manifests {
		platforms = append(platforms, m.Platform.String())
		if m.Digest != res.Images[m.Platform.Architecture] {
			t.Errorf("%s: digest %s, result says %s", m.Platform, m.Digest, res.Images[m.Platform.Architecture])
		}
	}
	if want := []string{"linux/amd64", "linux/arm64/v8"}; !slices.Equal(platforms, want) {
		t.Errorf("platforms %v, want %v", platforms, want)
	}
	if im.Annotations["org.opencontainers.image.revision"] != testCommit {
		t.Errorf("index annotations %v", im.Annotations)
	}

	binSize := fileSize(t, agentBin)
	var hostImg v1.Image
	var content int64
	// The host's image is unpacked as a container runtime would, to run it.
	root := filepath.Join(t.TempDir(), "root")
	for _, m := range im.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		arch := m.Platform.Architecture
		bin := map[bool]string{true: agentBin, false: stubBin}[arch == hostArch]
		checkConfig(t, img, arch)
		into := ""
		if arch == hostArch {
			into = root
		}
		n := checkFiles(t, img, bin, into)
		if arch == hostArch {
			hostImg, content = img, n
		}
	}

	// A few MB over the binary, compressed or not.
	var compressed int64
	layers, err := hostImg.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			t.Fatal(err)
		}
		compressed += n
	}
	t.Logf("binary %d bytes; image %d bytes compressed (%d layers), %d bytes of files", binSize, compressed, len(layers), content)
	if content-binSize > maxOverhead || compressed > binSize+maxOverhead {
		t.Errorf("image adds %d bytes of files to the %d-byte binary (%d compressed), want at most %d", content-binSize, binSize, compressed, maxOverhead)
	}

	// The docker archive: the same image, tagged with the version and latest.
	for _, tag := range []string{testVersion, ociimage.LatestTag} {
		ref, err := name.NewTag(ociimage.Repository + ":" + tag)
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(opts.DockerTars[hostArch], &ref)
		if err != nil {
			t.Fatalf("docker archive, tag %s: %v", tag, err)
		}
		checkConfig(t, img, hostArch)
		got, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := hostImg.ConfigName(); got != want {
			t.Errorf("docker archive config %s, layout's %s", got, want)
		}
		// The same layers (their files were checked above).
		if got, want := layerDigests(t, img), layerDigests(t, hostImg); !slices.Equal(got, want) {
			t.Errorf("docker archive layers %v, layout's %v", got, want)
		}
	}

	// The layout tar unpacks into the same layout.
	unpacked := filepath.Join(t.TempDir(), "oci")
	untar(t, opts.LayoutTar, unpacked)
	lp2, err := layout.FromPath(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	top2, err := lp2.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := digestOf(t, top2), digestOf(t, top); got != want {
		t.Errorf("layout tar's index.json %s, layout's %s", got, want)
	}
	if _, err := top2.ImageIndex(res.Index); err != nil {
		t.Errorf("layout tar: %v", err)
	}

	// Reproducible: two builds give the same digests and the same bytes;
	// the second one's layout replaces the first one's. (Of small
	// binaries: compressing the agent again would only take time.)
	small := func(dir string) ociimage.Options {
		o := options(dir)
		o.Binaries = []ociimage.Binary{{Arch: hostArch, Path: hostStub}, {Arch: other, Path: stubBin}}
		return o
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	resA, err := ociimage.Write(ctx, small(dirA))
	if err != nil {
		t.Fatal(err)
	}
	optsB := small(dirB)
	optsB.LayoutDir = small(dirA).LayoutDir
	resB, err := ociimage.Write(ctx, optsB)
	if err != nil {
		t.Fatal(err)
	}
	if resA.Index != resB.Index || resA.Images[hostArch] != resB.Images[hostArch] || resA.Index == res.Index {
		t.Errorf("two builds: index %s and %s (the agent's: %s)", resA.Index, resB.Index, res.Index)
	}
	for _, f := range []string{"oci.tar", "docker.tar"} {
		if a, b := sha256File(t, filepath.Join(dirA, f)), sha256File(t, filepath.Join(dirB, f)); a != b {
			t.Errorf("%s differs between two builds: %s, %s", f, a, b)
		}
	}
	if lp, err := layout.FromPath(optsB.LayoutDir); err != nil {
		t.Error(err)
	} else if top, err := lp.ImageIndex(); err != nil {
		t.Error(err)
	} else if _, err := top.ImageIndex(resB.Index); err != nil {
		t.Errorf("the layout written over: %v", err)
	}

	runInRoot(t, root)
	dockerRun(t, opts.DockerTars[hostArch], wantRef)
}

// checkConfig checks how the image runs.
func checkConfig(t *testing.T, img v1.Image, arch string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" {
		t.Errorf("%s: user %q, want 65532:65532", arch, c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/bin/no8s-agent"}) || !slices.Equal(c.Cmd, []string{"run", "--config", "/etc/no8s/no8s.yaml"}) {
		t.Errorf("%s: entrypoint %q, cmd %q", arch, c.Entrypoint, c.Cmd)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("%s: exposed ports %v", arch, c.ExposedPorts)
	}
	if c.WorkingDir != "/var/lib/no8s" {
		t.Errorf("%s: working dir %q", arch, c.WorkingDir)
	}
	want := map[string]string{
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.revision": testCommit,
		"org.opencontainers.image.created":  "2026-11-20T09:30:15Z",
		"org.opencontainers.image.source":   "https://github.com/no8s/no8s-agent",
	}
	for k, v := range want {
		if c.Labels[k] != v {
			t.Errorf("%s: label %s = %q, want %q", arch, k, c.Labels[k], v)
		}
	}
	if cf.OS != "linux" || cf.Architecture != arch || !cf.Created.Time.Equal(created) {
		t.Errorf("%s: config os %s arch %s created %s", arch, cf.OS, cf.Architecture, cf.Created)
	}
	if len(cf.History) != 2 || len(cf.RootFS.DiffIDs) != 2 {
		t.Errorf("%s: %d history entries, %d layers", arch, len(cf.History), len(cf.RootFS.DiffIDs))
	}
}

// checkFiles reads every layer: the files are the ones expected, all dated
// at the commit, and there is no shell or any other program. It returns the
// size of the files, and unpacks them under root when root is not empty
// (the image has no whiteouts, links or overwritten files: a layer is
// unpacked over the previous ones as it is).
func checkFiles(t *testing.T, img v1.Image, bin, root string) (size int64) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	contents := map[string][]byte{}
	for _, l := range layers {
		walkLayer(t, l, func(h *tar.Header, r io.Reader) {
			if !h.ModTime.Equal(created) {
				t.Errorf("%s dated %s, want %s", h.Name, h.ModTime, created)
			}
			if h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeReg {
				t.Errorf("%s: type %c: only files and folders expected", h.Name, h.Typeflag)
			}
			name := strings.TrimSuffix(h.Name, "/")
			if _, ok := files[name]; ok && h.Typeflag != tar.TypeDir {
				t.Errorf("%s: in two layers", name)
			}
			files[name] = h
			size += h.Size
			var data []byte
			if h.Typeflag == tar.TypeReg {
				var err error
				if data, err = io.ReadAll(r); err != nil {
					t.Fatal(err)
				}
				contents[name] = data
			}
			if root != "" {
				unpackEntry(t, root, h, bytes.NewReader(data), true)
			}
		})
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/sh", "bin", "sbin"} {
		if _, ok := files[shell]; ok {
			t.Errorf("%s in the image", shell)
		}
	}
	var programs []string
	for n, h := range files {
		if h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0 {
			programs = append(programs, n)
		}
	}
	if !slices.Equal(programs, []string{"usr/bin/no8s-agent"}) {
		t.Errorf("executables %v, want only usr/bin/no8s-agent", programs)
	}
	if want, err := os.ReadFile(bin); err != nil || !bytes.Equal(contents["usr/bin/no8s-agent"], want) {
		t.Errorf("usr/bin/no8s-agent is not the binary (%v)", err)
	}
	if !strings.Contains(string(contents["etc/passwd"]), "\nno8s:x:65532:65532:no8s-agent:/var/lib/no8s:/sbin/nologin\n") ||
		!strings.Contains(string(contents["etc/group"]), "\nno8s:x:65532:\n") {
		t.Errorf("passwd %q, group %q", contents["etc/passwd"], contents["etc/group"])
	}
	if want, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err != nil || !bytes.Equal(contents["etc/ssl/certs/ca-certificates.crt"], want) {
		t.Errorf("etc/ssl/certs/ca-certificates.crt is not the machine's CA bundle (%v)", err)
	}
	if h := files["var/lib/no8s"]; h == nil || h.Uid != 65532 || h.Gid != 65532 || h.Typeflag != tar.TypeDir {
		t.Errorf("var/lib/no8s: %+v, want a folder owned by 65532", h)
	}
	if h := files["tmp"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp: %+v, want a sticky world-writable folder", h)
	}
	return size
}

// walkLayer calls fn with each entry of the layer's uncompressed tar.
func walkLayer(t *testing.T, l v1.Layer, fn func(*tar.Header, io.Reader)) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(h, tr)
	}
}

// runInRoot runs the binary in the extracted root as the image's user,
// with nothing else there: it starts (it is static), and its embedded store
// is made in the state folder (the user may write there).
func runInRoot(t *testing.T, root string) {
	t.Helper()
	attr := &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	if os.Geteuid() != 0 {
		// Not root: a user namespace in which this user is 65532, which
		// owns the files extracted.
		attr.Cloneflags = syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 65532, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 65532, HostID: os.Getegid(), Size: 1}}
	}
	inRoot := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("/usr/bin/no8s-agent", args...)
		cmd.Dir = "/var/lib/no8s"
		cmd.Env = []string{"PATH=/usr/bin", "HOME=/var/lib/no8s"}
		cmd.SysProcAttr = attr
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("no8s-agent %s in the image's root: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := inRoot("version"); !strings.HasPrefix(out, "no8s-agent "+testVersion+" (commit "+testCommit) {
		t.Errorf("version in the image's root: %q", out)
	}
	inRoot("migrate")
	st, err := os.Stat(filepath.Join(root, "var/lib/no8s/.no8s/state.db"))
	if err != nil {
		t.Fatalf("migrate in the image's root made no store: %v", err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 && sys.Uid != 65532 {
		t.Errorf("the store is owned by %d, not 65532", sys.Uid)
	}
}

// dockerRun loads the archive into Docker and runs it, when a Docker
// daemon answers; this machine may have only the client.
func dockerRun(t *testing.T, archive, ref string) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Log("docker: not installed; the image was not loaded into Docker")
		return
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Logf("docker: no daemon answers (%v: %s); the image was not loaded into Docker", err, strings.TrimSpace(lastLine(string(out))))
		return
	}
	if out, err := exec.Command("docker", "load", "-i", archive).CombinedOutput(); err != nil {
		t.Fatalf("docker load: %v\n%s", err, out)
	}
	out, err := exec.Command("docker", "run", "--rm", ref, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), testVersion) {
		t.Fatalf("docker run %s version: %v\n%s", ref, err, out)
	}
	t.Logf("docker: loaded and ran %s", ref)
}

func TestMissingCACertificates(t *testing.T) {
	opts := ociimage.Options{Binaries: []ociimage.Binary{{Arch: hostArch, Path: agentBin}}, Version: testVersion,
		CACertFile: filepath.Join(t.TempDir(), "ca-certificates.crt")}
	_, err := ociimage.Write(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "apt-get install ca-certificates") {
		t.Errorf("error %v, want one saying what to install", err)
	}
}

func TestRefusedBinaries(t *testing.T) {
	dynamic, err := exec.LookPath("ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		bins []ociimage.Binary
		want string
	}{
		{"dynamic", []ociimage.Binary{{Arch: hostArch, Path: dynamic}}, "CGO_ENABLED=0"},
		{"wrong architecture", []ociimage.Binary{{Arch: other, Path: agentBin}}, "is for"},
		{"unknown architecture", []ociimage.Binary{{Arch: "riscv64", Path: agentBin}}, "only amd64 and arm64"},
		{"twice", []ociimage.Binary{{Arch: hostArch, Path: agentBin}, {Arch: hostArch, Path: agentBin}}, "two binaries"},
	} {
		_, err := ociimage.Write(context.Background(), ociimage.Options{Binaries: c.bins, Version: testVersion})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := options(t.TempDir())
	opts.LayoutDir = dir
	if _, err := ociimage.Write(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "not an OCI layout") {
		t.Errorf("layout over another folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep")); err != nil {
		t.Errorf("the folder was touched: %v", err)
	}
}

func untar(t *testing.T, file, dst string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unpack(t, f, dst, false)
}

// unpack writes the tar r under dst; owners are kept when asked and
// possible (as root).
func unpack(t *testing.T, r io.Reader, dst string, owners bool) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		unpackEntry(t, dst, h, tr, owners)
	}
}

// unpackEntry writes one file or folder of a tar under dst.
func unpackEntry(t *testing.T, dst string, h *tar.Header, r io.Reader, owners bool) {
	t.Helper()
	p := filepath.Join(dst, filepath.FromSlash(h.Name))
	if !strings.HasPrefix(p, dst+string(filepath.Separator)) {
		t.Fatalf("%s: outside the root", h.Name)
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	case tar.TypeReg:
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, r); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("%s: unexpected type %c", h.Name, h.Typeflag)
	}
	if err := os.Chmod(p, os.FileMode(h.Mode&0o777)|map[bool]os.FileMode{true: os.ModeSticky}[h.Mode&0o1000 != 0]); err != nil {
		t.Fatal(err)
	}
	if owners && os.Geteuid() == 0 {
		if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
			t.Fatal(err)
		}
	}
}

func layerDigests(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Hash
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func digestOf(t *testing.T, ii v1.ImageIndex) v1.Hash {
	t.Helper()
	d, err := ii.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
