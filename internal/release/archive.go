package release

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// staticFile is a file of the checkout that goes into archives or packages.
type staticFile struct {
	Path string // where it is, under the module's root
	Data []byte
}

// static are the checkout's files a release ships.
type static struct {
	Docs   []staticFile // README.md, and LICENSE when there is one
	Config staticFile   // packaging/no8s.yaml: /etc/no8s/no8s.yaml
	Env    staticFile   // packaging/no8s.env: /etc/no8s/no8s.env
	Unit   staticFile   // packaging/no8s-agent.service
	// Scripts are the packages' maintainer scripts, by nfpm's name
	// (preinstall, postinstall, preremove, postremove), as paths.
	Scripts map[string]string
}

// readStatic reads the files of packaging/ and the documents from the
// module's root dir.
func readStatic(dir string) (*static, error) {
	read := func(rel string) (staticFile, error) {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			return staticFile{}, fmt.Errorf("release: %w", err)
		}
		return staticFile{Path: rel, Data: b}, nil
	}
	s := &static{Scripts: map[string]string{}}
	var err error
	for _, rel := range []string{"README.md", "LICENSE"} {
		f, ferr := read(rel)
		switch {
		case ferr == nil:
			s.Docs = append(s.Docs, f)
		case errors.Is(ferr, fs.ErrNotExist) && rel == "LICENSE":
		default:
			return nil, ferr
		}
	}
	if s.Config, err = read("packaging/no8s.yaml"); err != nil {
		return nil, err
	}
	if s.Env, err = read("packaging/no8s.env"); err != nil {
		return nil, err
	}
	if s.Unit, err = read("packaging/no8s-agent.service"); err != nil {
		return nil, err
	}
	for _, name := range []string{"preinstall", "postinstall", "preremove", "postremove"} {
		p := filepath.Join(dir, "packaging", "scripts", name+".sh")
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		s.Scripts[name] = p
	}
	return s, nil
}

// archiveFile is one file in an archive.
type archiveFile struct {
	Name string // path in the archive, under its top folder
	Mode int64
	Data []byte // nil: read from Source
	// Source is the file on disk when Data is nil.
	Source string
}

// archiveFiles lists what the archive of t holds: the binary, the
// documents, completions, the default configuration and, for linux, the
// systemd unit the packages install.
func archiveFiles(bin string, t Target, comp map[string][]byte, s *static) []archiveFile {
	files := []archiveFile{{Name: Name, Mode: 0o755, Source: bin}}
	for _, d := range s.Docs {
		files = append(files, archiveFile{Name: d.Path, Mode: 0o644, Data: d.Data})
	}
	for _, c := range completionShells {
		files = append(files, archiveFile{Name: "completions/" + c.File, Mode: 0o644, Data: comp[c.Shell]})
	}
	files = append(files,
		archiveFile{Name: "no8s.yaml", Mode: 0o644, Data: s.Config.Data},
		// It is where secrets go: readable by its owner alone from the
		// start.
		archiveFile{Name: "no8s.env", Mode: 0o600, Data: s.Env.Data})
	if t.OS == "linux" {
		files = append(files, archiveFile{Name: "systemd/" + Name + ".service", Mode: 0o644, Data: s.Unit.Data})
	}
	return files
}

// writeArchive writes files under the folder top into a tar.gz at out.
// The bytes depend only on the files and mtime: entries sorted, folders
// listed, owner root, every time mtime, gzip without a name or time.
func writeArchive(out, top string, files []archiveFile, mtime time.Time) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("release: %w", cerr)
		}
	}()
	zw, err := gzip.NewWriterLevel(f, gzip.DefaultCompression)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	tw := tar.NewWriter(zw)

	type entry struct {
		name string
		file *archiveFile
	}
	dirs := map[string]bool{top: true}
	var entries []entry
	for i := range files {
		name := path.Join(top, files[i].Name)
		entries = append(entries, entry{name, &files[i]})
		for d := path.Dir(name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		entries = append(entries, entry{name: d + "/"})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })

	for _, e := range entries {
		h := &tar.Header{Name: e.name, ModTime: mtime, Uid: 0, Gid: 0, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		if e.file == nil {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
			if err := tw.WriteHeader(h); err != nil {
				return fmt.Errorf("release: %s: %w", out, err)
			}
			continue
		}
		data := e.file.Data
		if data == nil {
			if data, err = os.ReadFile(e.file.Source); err != nil {
				return fmt.Errorf("release: %w", err)
			}
		}
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, e.file.Mode, int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("release: %s: %w", out, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("release: %s: %w", out, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("release: %s: %w", out, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("release: %s: %w", out, err)
	}
	return nil
}
