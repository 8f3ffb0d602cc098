package release_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/jackc/pgx/v5"
	rpmutils "github.com/sassoftware/go-rpmutils"

	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/internal/release"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	for _, dir := range builtDirs {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// The build every test reads: one linux platform (this machine's when it
// is linux), made once by the release command, as `make dist` makes it.
// The command runs as a program of its own: built into the test binary,
// the race detector would slow its compression tenfold.
const (
	testVersion = "v1.2.3"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
	testDate    = "2026-11-27T20:44:07Z"
)

var (
	testTime = time.Date(2026, 11, 27, 20, 44, 7, 0, time.UTC)

	buildMu   sync.Mutex
	command   string
	builds    = map[string]*result{}
	buildErrs = map[string]error{}
	builtDirs []string
)

// result names the files of one test build.
type result struct {
	Dir       string // the output folder
	Binary    string
	Archive   string
	SBOM      string
	Deb, RPM  string
	Checksums string
	// Image is the multi-architecture OCI layout's tar, DockerImage the
	// docker-archive tar of the target's architecture.
	Image, DockerImage string
}

func testTarget() release.Target {
	if runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") {
		return release.Target{OS: "linux", Arch: runtime.GOARCH}
	}
	return release.Target{OS: "linux", Arch: "amd64"}
}

// built returns the release build named key, making it on first use. The
// same key gives the same build to every test; another key builds again
// (into another folder) from the same commit.
func built(t *testing.T, key string) *result {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if err := buildErrs[key]; err != nil {
		t.Fatalf("release build %s: %v", key, err)
	}
	if res, ok := builds[key]; ok {
		return res
	}
	res, err := buildRelease(t, key)
	builds[key], buildErrs[key] = res, err
	if err != nil {
		t.Fatalf("release build %s: %v", key, err)
	}
	return res
}

func buildRelease(t *testing.T, key string) (*result, error) {
	dir, err := os.MkdirTemp("", "no8s-release-test-")
	if err != nil {
		return nil, err
	}
	builtDirs = append(builtDirs, dir)
	root := moduleRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if command == "" {
		bin := filepath.Join(dir, "no8s-release")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/no8s-release")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build ./cmd/no8s-release: %w\n%s", err, out)
		}
		command = bin
	}
	tt := testTarget()
	out := filepath.Join(dir, "dist")
	start := time.Now()
	cmd := exec.CommandContext(ctx, command, "-dir", root, "-out", out, "-version", testVersion, "-commit", testCommit,
		"-date", testDate, "-targets", tt.String())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("no8s-release: %w\n%s", err, stderr.Bytes())
	}
	t.Logf("release build %s: %s", key, time.Since(start).Round(time.Millisecond))
	rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[tt.Arch]
	res := &result{
		Dir:         out,
		Binary:      filepath.Join(out, "build", tt.OS+"_"+tt.Arch, "no8s-agent"),
		Archive:     filepath.Join(out, fmt.Sprintf("no8s-agent_1.2.3_%s_%s.tar.gz", tt.OS, tt.Arch)),
		SBOM:        filepath.Join(out, fmt.Sprintf("no8s-agent_1.2.3_%s_%s.sbom.cdx.json", tt.OS, tt.Arch)),
		Deb:         filepath.Join(out, "no8s-agent_1.2.3-1_"+tt.Arch+".deb"),
		RPM:         filepath.Join(out, "no8s-agent-1.2.3-1."+rpmArch+".rpm"),
		Checksums:   filepath.Join(out, "checksums.txt"),
		Image:       filepath.Join(out, "no8s-agent_1.2.3_oci.tar"),
		DockerImage: filepath.Join(out, "no8s-agent_1.2.3_linux_"+tt.Arch+".docker.tar"),
	}
	// The command lists what it wrote, checksums.txt last.
	printed := strings.Fields(stdout.String())
	want := []string{res.RPM, res.Deb, res.DockerImage, res.SBOM, res.Archive, res.Image, res.Checksums}
	if !slices.Equal(printed, want) {
		return nil, fmt.Errorf("no8s-release printed %q, want %q", printed, want)
	}
	if _, err := os.Stat(res.Binary); err != nil {
		return nil, err
	}
	return res, nil
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return dir
}

func need(t *testing.T, tools ...string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("checking the linux packages needs linux, not %s", runtime.GOOS)
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed, and the packages cannot be checked without it: `make release-tools` installs it", tool)
		}
	}
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// entry is a file a package or archive holds, as its tar header says.
type entry struct {
	Mode        int64
	Dir         bool
	Owner       string
	Group       string
	ModTime     time.Time
	Data        []byte
	HeaderOrder int
}

func readTar(t *testing.T, r io.Reader) (map[string]entry, []string) {
	t.Helper()
	tr := tar.NewReader(r)
	out := map[string]entry{}
	var order []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, order
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "."), "/")
		out[name] = entry{Mode: h.Mode & 0o7777, Dir: h.Typeflag == tar.TypeDir, Owner: h.Uname, Group: h.Gname,
			ModTime: h.ModTime, Data: data, HeaderOrder: len(order)}
		order = append(order, name)
	}
}

func TestArchive(t *testing.T) {
	res := built(t, "a")
	tt := testTarget()
	path := res.Archive
	wantName := fmt.Sprintf("no8s-agent_1.2.3_%s_%s.tar.gz", tt.OS, tt.Arch)
	if filepath.Base(path) != wantName {
		t.Fatalf("archive %s, want %s", path, wantName)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header has time %v and name %q: it must hold neither", zr.ModTime, zr.Name)
	}
	entries, order := readTar(t, zr)
	top := strings.TrimSuffix(wantName, ".tar.gz")
	want := map[string]int64{
		top: 0o755, top + "/no8s-agent": 0o755, top + "/README.md": 0o644,
		top + "/completions": 0o755, top + "/completions/no8s-agent": 0o644,
		top + "/completions/_no8s-agent": 0o644, top + "/completions/no8s-agent.fish": 0o644,
		top + "/no8s.yaml": 0o644, top + "/no8s.env": 0o600,
		top + "/systemd": 0o755, top + "/systemd/no8s-agent.service": 0o644,
	}
	if _, err := os.Stat(filepath.Join(moduleRoot(t), "LICENSE")); err == nil {
		want[top+"/LICENSE"] = 0o644
	}
	var got []string
	for name, e := range entries {
		got = append(got, name)
		mode, ok := want[name]
		switch {
		case !ok:
			t.Errorf("archive holds %s, which it should not", name)
		case e.Mode != mode:
			t.Errorf("%s: mode %o, want %o", name, e.Mode, mode)
		}
		if !e.ModTime.Equal(testTime) {
			t.Errorf("%s: mtime %v, want the commit's %v", name, e.ModTime, testTime)
		}
		if e.Owner != "root" || e.Group != "root" {
			t.Errorf("%s: owner %s:%s, want root:root", name, e.Owner, e.Group)
		}
	}
	for name := range want {
		if _, ok := entries[name]; !ok {
			t.Errorf("archive lacks %s", name)
		}
	}
	if !slices.IsSorted(order) {
		t.Errorf("entries are not sorted: %v", order)
	}
	bin, err := os.ReadFile(res.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(entries[top+"/no8s-agent"].Data, bin) {
		t.Error("the archive's binary is not the built one")
	}
	// Each completion is the script cobra writes for its shell.
	for file, marker := range map[string]string{
		"no8s-agent": "__start_no8s-agent", "_no8s-agent": "#compdef no8s-agent", "no8s-agent.fish": "complete -c no8s-agent",
	} {
		if data := entries[top+"/completions/"+file].Data; !bytes.Contains(data, []byte(marker)) {
			t.Errorf("completions/%s lacks %q:\n%.300s", file, marker, data)
		}
	}
	packaged, err := os.ReadFile(filepath.Join(moduleRoot(t), "packaging", "no8s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(entries[top+"/no8s.yaml"].Data, packaged) {
		t.Error("the archive's no8s.yaml is not packaging/no8s.yaml")
	}
}

// TestBinaryStamp runs the built binary: it must be static and print the
// version, commit and date it was built with.
func TestBinaryStamp(t *testing.T) {
	res := built(t, "a")
	tt := testTarget()
	bin := res.Binary
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": tt.OS, "GOARCH": tt.Arch} {
		if settings[k] != v {
			t.Errorf("build setting %s = %q, want %q", k, settings[k], v)
		}
	}
	if runtime.GOOS != tt.OS || runtime.GOARCH != tt.Arch {
		t.Skipf("cannot run a %s binary here", tt)
	}
	checkVersion(t, bin, tt)
}

func checkVersion(t *testing.T, bin string, tt release.Target) {
	t.Helper()
	var v struct{ Version, Commit, BuildDate, Platform string }
	if err := json.Unmarshal(run(t, bin, "version", "-o", "json"), &v); err != nil {
		t.Fatal(err)
	}
	want := struct{ Version, Commit, BuildDate, Platform string }{testVersion, testCommit, "2026-11-27T20:44:07Z", tt.String()}
	if v != want {
		t.Errorf("version prints %+v, want %+v", v, want)
	}
}

// TestReproducible builds again into another folder: every file must have
// the same bytes.
func TestReproducible(t *testing.T) {
	a, b := built(t, "a"), built(t, "b")
	da, db := a.Dir, b.Dir
	names := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			if e.Type().IsRegular() {
				out = append(out, e.Name())
			}
		}
		return out
	}
	na, nb := names(da), names(db)
	if !slices.Equal(na, nb) || len(na) < 5 {
		t.Fatalf("the builds made %v and %v", na, nb)
	}
	for _, name := range na {
		x, err := os.ReadFile(filepath.Join(da, name))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(db, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds of one commit", name)
		}
	}
}

func TestChecksums(t *testing.T) {
	res := built(t, "a")
	dir := res.Dir
	data, err := os.ReadFile(res.Checksums)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("line %q is not <sha256>  <name>", sc.Text())
		}
		listed[name] = sum
		order = append(order, name)
	}
	if !slices.IsSorted(order) {
		t.Errorf("names not sorted: %v", order)
	}
	var want []string
	for _, p := range []string{res.Archive, res.SBOM, res.Deb, res.RPM, res.Image, res.DockerImage} {
		want = append(want, filepath.Base(p))
	}
	sort.Strings(want)
	if !slices.Equal(order, want) {
		t.Errorf("checksums.txt lists %v, want %v", order, want)
	}
	for name, sum := range listed {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: checksums.txt says %s, the file's is %x", name, sum, got)
		}
	}
	// The tool people will check them with.
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "--check", "--strict", "checksums.txt")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum --check: %v\n%s", err, out)
		}
	}
}

// cdxComponent is what the test reads of a CycloneDX component.
type cdxComponent struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl"`
	Hashes  []struct {
		Alg     string `json:"alg"`
		Content string `json:"content"`
	} `json:"hashes"`
}

func TestSBOM(t *testing.T) {
	res := built(t, "a")
	data, err := os.ReadFile(res.SBOM)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat    string `json:"bomFormat"`
		SpecVersion  string `json:"specVersion"`
		SerialNumber string `json:"serialNumber"`
		Metadata     struct {
			Component cdxComponent `json:"component"`
		} `json:"metadata"`
		Components []cdxComponent `json:"components"`
	}
	if err := json.Unmarshal(data, &bom); err != nil {
		t.Fatalf("the SBOM is not JSON: %v", err)
	}
	if bom.BOMFormat != "CycloneDX" || !strings.HasPrefix(bom.SpecVersion, "1.") || !strings.HasPrefix(bom.SerialNumber, "urn:uuid:") {
		t.Errorf("bomFormat %q, specVersion %q, serialNumber %q: not a CycloneDX document", bom.BOMFormat, bom.SpecVersion, bom.SerialNumber)
	}
	main := bom.Metadata.Component
	if main.Name != "github.com/no8s/no8s-agent" || main.Version != testVersion {
		t.Errorf("the SBOM describes %s %s, want github.com/no8s/no8s-agent %s", main.Name, main.Version, testVersion)
	}
	// Every module linked into the binary is listed with the version and
	// hash the go command recorded, and nothing else is.
	info, err := buildinfo.ReadFile(res.Binary)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]cdxComponent{}
	for _, c := range bom.Components {
		listed[c.Name] = c
	}
	for _, dep := range info.Deps {
		m := dep
		if dep.Replace != nil {
			m = dep.Replace
		}
		c, ok := listed[m.Path]
		if !ok {
			t.Errorf("the SBOM lacks %s %s", m.Path, m.Version)
			continue
		}
		if c.Version != m.Version || !strings.HasPrefix(c.PURL, "pkg:golang/") {
			t.Errorf("the SBOM lists %s as %s (%s), the binary has %s", m.Path, c.Version, c.PURL, m.Version)
		}
		if len(c.Hashes) == 0 {
			t.Errorf("the SBOM gives no hash for %s", m.Path)
		}
	}
	if c, ok := listed["github.com/jackc/pgx/v5"]; !ok || !strings.HasPrefix(c.Version, "v5.") {
		t.Errorf("the SBOM lists pgx as %+v, want github.com/jackc/pgx/v5 at a v5 version", c)
	}
	if _, ok := listed["std"]; !ok {
		t.Error("the SBOM does not list the Go standard library")
	}
	for name := range listed {
		if strings.Contains(name, "nfpm") || strings.Contains(name, "cyclonedx") {
			t.Errorf("the SBOM lists %s, a release tool the agent does not link", name)
		}
	}
}

// debPackage returns the deb of the test build and the folder it was
// unpacked into with dpkg-deb -x.
func debPackage(t *testing.T) (string, string) {
	t.Helper()
	need(t, "dpkg-deb")
	deb := built(t, "a").Deb
	root := t.TempDir()
	run(t, "dpkg-deb", "-x", deb, root)
	return deb, root
}

func TestDeb(t *testing.T) {
	deb, root := debPackage(t)
	tt := testTarget()

	fields := map[string]string{}
	for _, line := range strings.Split(string(run(t, "dpkg-deb", "--field", deb)), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			fields[k] = v
		}
	}
	for k, v := range map[string]string{"Package": "no8s-agent", "Version": "1.2.3-1", "Architecture": tt.Arch, "Section": "admin"} {
		if fields[k] != v {
			t.Errorf("control field %s = %q, want %q", k, fields[k], v)
		}
	}

	// The configuration is the administrator's: an upgrade keeps it.
	conffiles := strings.Fields(string(run(t, "dpkg-deb", "--info", deb, "conffiles")))
	if want := []string{release.EnvPath, release.ConfigPath}; !slices.Equal(conffiles, want) {
		t.Errorf("conffiles %v, want %v", conffiles, want)
	}
	ctrl, _ := readTar(t, bytes.NewReader(run(t, "dpkg-deb", "--ctrl-tarfile", deb)))
	for script, src := range map[string]string{"preinst": "preinstall", "postinst": "postinstall", "prerm": "preremove", "postrm": "postremove"} {
		e, ok := ctrl["/"+script]
		want, err := os.ReadFile(filepath.Join(moduleRoot(t), "packaging", "scripts", src+".sh"))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !ok:
			t.Errorf("no %s script", script)
		case e.Mode&0o111 == 0:
			t.Errorf("%s is not executable: mode %o", script, e.Mode)
		case !bytes.Equal(e.Data, want):
			t.Errorf("%s is not packaging/scripts/%s.sh", script, src)
		}
	}

	// Owners and modes, as dpkg will install them.
	data, _ := readTar(t, bytes.NewReader(run(t, "dpkg-deb", "--fsys-tarfile", deb)))
	checkFiles(t, "deb", func(path string) (fileMeta, bool) {
		e, ok := data[path]
		return fileMeta{Mode: e.Mode, Dir: e.Dir, Owner: e.Owner, Group: e.Group, Size: int64(len(e.Data)), SHA256: sum(e.Data)}, ok
	}, release.ZshCompletionDeb)

	// The unpacked binary runs.
	if runtime.GOOS == tt.OS && runtime.GOARCH == tt.Arch {
		checkVersion(t, filepath.Join(root, release.BinaryPath), tt)
	}
}

// fileMeta is what a package says of one of its files.
type fileMeta struct {
	Mode         int64
	Dir          bool
	Owner, Group string
	Size         int64
	SHA256       string // of the contents, in hex
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkFiles checks the files a package installs, as lookup finds them.
func checkFiles(t *testing.T, format string, lookup func(path string) (fileMeta, bool), zsh string) {
	t.Helper()
	want := []struct {
		path         string
		mode         int64
		dir          bool
		owner, group string
	}{
		{release.BinaryPath, 0o755, false, "root", "root"},
		{release.ConfigDir, 0o750, true, "root", release.User},
		{release.ConfigPath, 0o640, false, "root", release.User},
		{release.EnvPath, 0o600, false, "root", "root"},
		{release.UnitPath, 0o644, false, "root", "root"},
		{"/var/lib/no8s", 0o750, true, release.User, release.User},
		{release.ManifestsDir, 0o750, true, "root", release.User},
		{release.BashCompletion, 0o644, false, "root", "root"},
		{release.FishCompletion, 0o644, false, "root", "root"},
		{zsh, 0o644, false, "root", "root"},
		{"/usr/share/doc/no8s-agent/README.md", 0o644, false, "root", "root"},
	}
	for _, w := range want {
		m, ok := lookup(w.path)
		switch {
		case !ok:
			t.Errorf("%s: no %s", format, w.path)
		case m.Mode != w.mode || m.Dir != w.dir || m.Owner != w.owner || m.Group != w.group:
			t.Errorf("%s: %s is mode %o dir %v %s:%s, want mode %o dir %v %s:%s", format, w.path,
				m.Mode, m.Dir, m.Owner, m.Group, w.mode, w.dir, w.owner, w.group)
		case !w.dir && m.Size == 0:
			t.Errorf("%s: %s is empty", format, w.path)
		}
	}
	for path, src := range map[string]string{release.ConfigPath: "no8s.yaml", release.EnvPath: "no8s.env", release.UnitPath: "no8s-agent.service"} {
		want, err := os.ReadFile(filepath.Join(moduleRoot(t), "packaging", src))
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := lookup(path); m.SHA256 != sum(want) {
			t.Errorf("%s: %s is not packaging/%s", format, path, src)
		}
	}
}

func TestRPM(t *testing.T) {
	res := built(t, "a")
	tt := testTarget()
	rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[tt.Arch]
	f, err := os.Open(res.RPM)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rpm, err := rpmutils.ReadRpm(f)
	if err != nil {
		t.Fatal(err)
	}
	nevra, err := rpm.Header.GetNEVRA()
	if err != nil {
		t.Fatal(err)
	}
	if nevra.Name != "no8s-agent" || nevra.Version != "1.2.3" || nevra.Release != "1" || nevra.Arch != rpmArch {
		t.Errorf("rpm is %+v, want no8s-agent 1.2.3-1 %s", nevra, rpmArch)
	}
	for tag, src := range map[int]string{rpmutils.PREIN: "preinstall", rpmutils.POSTIN: "postinstall",
		rpmutils.PREUN: "preremove", rpmutils.POSTUN: "postremove"} {
		got, err := rpm.Header.GetString(tag)
		if err != nil {
			t.Fatalf("rpm script %s: %v", src, err)
		}
		want, err := os.ReadFile(filepath.Join(moduleRoot(t), "packaging", "scripts", src+".sh"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
			t.Errorf("rpm's %s script is not packaging/scripts/%s.sh:\n%s", src, src, got)
		}
	}
	infos, err := rpm.Header.GetFiles()
	if err != nil {
		t.Fatal(err)
	}
	// The header's digests are the SHA-256 of each file's contents.
	algo, err := rpm.Header.GetInts(rpmutils.FILEDIGESTALGO)
	if err != nil || len(algo) == 0 {
		t.Fatalf("rpm file digest algorithm %v (%v)", algo, err)
	}
	for _, a := range algo {
		if a != rpmutils.PGPHASHALGO_SHA256 {
			t.Fatalf("rpm file digest algorithm %v, want SHA-256 (%d)", algo, rpmutils.PGPHASHALGO_SHA256)
		}
	}
	meta := map[string]fileMeta{}
	flags := map[string]int{}
	for _, fi := range infos {
		meta[fi.Name()] = fileMeta{Mode: int64(fi.Mode() & 0o7777), Dir: fi.Mode()&0o170000 == 0o040000,
			Owner: fi.UserName(), Group: fi.GroupName(), Size: fi.Size(), SHA256: fi.Digest()}
		flags[fi.Name()] = fi.Flags()
	}
	checkFiles(t, "rpm", func(path string) (fileMeta, bool) { m, ok := meta[path]; return m, ok }, release.ZshCompletionRPM)
	for _, p := range []string{release.ConfigPath, release.EnvPath} {
		if want := rpmutils.RPMFILE_CONFIG | rpmutils.RPMFILE_NOREPLACE; flags[p]&want != want {
			t.Errorf("rpm: %s has flags %b, want %%config(noreplace)", p, flags[p])
		}
	}
	if flags[release.BinaryPath]&rpmutils.RPMFILE_CONFIG != 0 {
		t.Errorf("rpm: %s is marked as configuration", release.BinaryPath)
	}
	bin, err := os.ReadFile(res.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if meta[release.BinaryPath].SHA256 != sum(bin) {
		t.Error("rpm: the packaged binary is not the built one")
	}
}

// TestMaintainerScripts checks the scripts' syntax with the shell that
// runs them.
func TestMaintainerScripts(t *testing.T) {
	need(t, "sh")
	scripts, err := filepath.Glob(filepath.Join(moduleRoot(t), "packaging", "scripts", "*.sh"))
	if err != nil || len(scripts) != 4 {
		t.Fatalf("scripts %v (%v), want 4", scripts, err)
	}
	for _, s := range scripts {
		run(t, "sh", "-n", s)
	}
}

// verifyUnit runs systemd-analyze verify on the unit text, with ExecStart
// pointing at bin, and returns what it reports of the unit: an error when
// it fails or has anything to say about it.
func verifyUnit(t *testing.T, unit []byte, bin string) error {
	t.Helper()
	text := strings.ReplaceAll(string(unit), "ExecStart="+release.BinaryPath+" ", "ExecStart="+bin+" ")
	if text == string(unit) {
		return fmt.Errorf("the unit has no ExecStart=%s", release.BinaryPath)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, filepath.Base(release.UnitPath))
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("systemd-analyze", "verify", "--man=no", path)
	out, err := cmd.CombinedOutput()
	// Complaints about other units of this machine are not the unit's.
	var ours []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, filepath.Base(path)) || strings.Contains(line, bin) {
			ours = append(ours, line)
		}
	}
	if err != nil || len(ours) > 0 {
		return fmt.Errorf("systemd-analyze verify: %v\n%s", err, strings.Join(ours, "\n"))
	}
	return nil
}

func TestUnit(t *testing.T) {
	need(t, "systemd-analyze")
	_, root := debPackage(t)
	bin := filepath.Join(root, release.BinaryPath)
	unit, err := os.ReadFile(filepath.Join(root, release.UnitPath))
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyUnit(t, unit, bin); err != nil {
		t.Error(err)
	}
	// The checker itself finds a mistake: a misspelt setting and a bad value.
	for _, bad := range []string{"NoNewPrivilegez=yes", "ProtectSystem=sometimes"} {
		broken := strings.Replace(string(unit), "[Service]\n", "[Service]\n"+bad+"\n", 1)
		if err := verifyUnit(t, []byte(broken), bin); err == nil {
			t.Errorf("systemd-analyze verify passed a unit with %s", bad)
		}
	}

	settings := map[string][]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			settings[k] = append(settings[k], v)
		}
	}
	for k, v := range map[string]string{
		"User": release.User, "Group": release.User, "ProtectSystem": "strict", "ProtectHome": "yes",
		"NoNewPrivileges": "yes", "PrivateTmp": "yes", "StateDirectory": "no8s", "CacheDirectory": "no8s",
		"Restart": "on-failure", "CapabilityBoundingSet": "", "EnvironmentFile": "-" + release.EnvPath,
		"ExecStart":        release.BinaryPath + " run --config " + release.ConfigPath + " --cache-dir /var/cache/no8s",
		"WorkingDirectory": "/var/lib/no8s",
	} {
		if !slices.Equal(settings[k], []string{v}) {
			t.Errorf("unit sets %s=%q, want %q", k, settings[k], v)
		}
	}
	if rw := settings["ReadWritePaths"]; len(rw) > 0 {
		t.Errorf("unit sets ReadWritePaths=%v: the state and cache directories are all it writes", rw)
	}
}

// TestPackagedConfig runs the unpacked agent as the service would, on its
// packaged configuration, against a real PostgreSQL reached through the PG*
// variables the environment file documents: the configuration loads, and
// the agent connects and migrates the database.
func TestPackagedConfig(t *testing.T) {
	_, root := debPackage(t)
	path := filepath.Join(root, release.ConfigPath)
	cfg, err := config.Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("the packaged configuration does not load: %v", err)
	}
	if len(cfg.Sources) != 1 || cfg.Sources[0].Dir != release.ManifestsDir {
		t.Errorf("sources %+v, want the folder %s", cfg.Sources, release.ManifestsDir)
	}
	tt := testTarget()
	if runtime.GOOS != tt.OS || runtime.GOARCH != tt.Arch {
		t.Skipf("cannot run a %s binary here", tt)
	}
	pc, err := pgx.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(),
		"PGHOST=" + pc.Host, fmt.Sprintf("PGPORT=%d", pc.Port), "PGUSER=" + pc.User, "PGDATABASE=" + pc.Database}
	if pc.Password != "" {
		env = append(env, "PGPASSWORD="+pc.Password)
	}
	agent := func(args ...string) []byte {
		cmd := exec.Command(filepath.Join(root, release.BinaryPath), args...)
		cmd.Env, cmd.Dir = env, t.TempDir()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("no8s-agent %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// migrate takes the database alone: the configuration's, with the
	// same variables. get reads the store the configuration names.
	agent("migrate", "--database", cfg.Database)
	var sources []any
	if out := agent("get", "sources", "--config", path, "-o", "json"); json.Unmarshal(out, &sources) != nil || len(sources) != 0 {
		t.Errorf("get sources --config with the packaged configuration printed %s, want []", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var tables int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables == 0 {
		t.Error("the agent made no tables in the database the PG* variables name")
	}
}

func TestPackageVersion(t *testing.T) {
	at := time.Date(2026, 11, 27, 20, 44, 7, 0, time.UTC)
	for _, c := range []struct{ version, commit, want string }{
		{"v1.2.3", "", "1.2.3"},
		{"v1.2.3-rc.1", "", "1.2.3-rc.1"},
		{"v1.2.3-4-gafa3531", "", "1.2.4-0.git.20261127204407.4.gafa3531"},
		{"v1.2.3-4-gafa3531-dirty", "", "1.2.4-0.git.20261127204407.4.gafa3531.dirty"},
		{"afa3531", "", "0.0.0-git.20261127204407.afa3531"},
		{"afa3531-dirty", "", "0.0.0-git.20261127204407.afa3531.dirty"},
		{"0123456", "", "0.0.0-git.20261127204407.g0123456"},
		{"devel", "afa35310000", "0.0.0-git.20261127204407.afa35310000"},
		{"1.2.3", "", "0.0.0-git.20261127204407.1.2.3"},
	} {
		got, err := release.PackageVersion(c.version, c.commit, at)
		if err != nil || got != c.want {
			t.Errorf("PackageVersion(%q, %q) = %q, %v; want %q", c.version, c.commit, got, err, c.want)
		}
	}
	if v, err := release.PackageVersion("devel", "", at); err == nil {
		t.Errorf("PackageVersion of nothing = %q, want an error", v)
	}
}

func TestParseTargets(t *testing.T) {
	got, err := release.ParseTargets("linux/amd64, darwin/arm64")
	if want := []release.Target{{OS: "linux", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("ParseTargets = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"linux", "windows/amd64", "linux/386", ""} {
		if got, err := release.ParseTargets(bad); err == nil {
			t.Errorf("ParseTargets(%q) = %v, want an error", bad, got)
		}
	}
}

// The container image make dist writes is the release's: its binary, its
// version and commit, in the files checksums.txt lists.
func TestImage(t *testing.T) {
	t.Parallel()
	res := built(t, "a")
	img, err := tarball.ImageFromPath(res.DockerImage, nil)
	if err != nil {
		t.Fatalf("docker tar: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User == "" || cf.Config.User == "0" || strings.HasPrefix(cf.Config.User, "0:") || cf.Architecture != testTarget().Arch {
		t.Errorf("image runs as %q on %s", cf.Config.User, cf.Architecture)
	}
	if got := cf.Config.Labels["org.opencontainers.image.version"]; got != testVersion {
		t.Errorf("image version label %q, want %q", got, testVersion)
	}
	if got := cf.Config.Labels["org.opencontainers.image.revision"]; got != testCommit {
		t.Errorf("image revision label %q, want %q", got, testCommit)
	}
	// The layer holding the agent holds the release's binary, byte for byte.
	want, err := os.ReadFile(res.Binary)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if h.Name == "usr/bin/no8s-agent" || h.Name == "/usr/bin/no8s-agent" {
				// Its size and first 64 KiB: decompressing all of it
				// under the race detector takes half a minute.
				head := make([]byte, 64<<10)
				if _, err := io.ReadFull(tr, head); err != nil {
					t.Fatal(err)
				}
				found = h.Size == int64(len(want)) && bytes.Equal(head, want[:len(head)])
				break
			}
		}
		rc.Close()
	}
	if !found {
		t.Error("no layer holds the release's binary at /usr/bin/no8s-agent")
	}
	sums, err := os.ReadFile(res.Checksums)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{res.Image, res.DockerImage} {
		if !strings.Contains(string(sums), "  "+filepath.Base(f)+"\n") {
			t.Errorf("checksums.txt does not list %s:\n%s", filepath.Base(f), sums)
		}
	}
}
