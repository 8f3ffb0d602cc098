package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set at build time by `make build`:
// -ldflags "-X main.version=... -X main.commit=... -X main.buildDate=...".
var (
	version   = ""
	commit    = ""
	buildDate = ""
)

// buildInfo is what `version` says of the binary.
type buildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// currentBuild returns the stamped values, and where none were stamped what
// the Go toolchain recorded: the module version, and the Git commit and
// its time when built inside a work tree ("+dirty" with local changes).
func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, BuildDate: buildDate, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if b.Version == "" {
		b.Version = "(devel)"
		if ok && info.Main.Version != "" {
			b.Version = info.Main.Version
		}
	}
	if ok {
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if b.Commit == "" && settings["vcs.revision"] != "" {
			b.Commit = settings["vcs.revision"]
			if settings["vcs.modified"] == "true" {
				b.Commit += "+dirty"
			}
		}
		if b.BuildDate == "" {
			b.BuildDate = settings["vcs.time"]
		}
	}
	return b
}

func versionString() string { return currentBuild().Version }

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", "version [-o text|json]", stderr)
	output := fs.String("o", "text", "output format: text or json")
	rest, code := parseFlags(fs, args)
	if code >= 0 {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "version: unexpected argument %q\n", rest[0])
		return exitError
	}
	b := currentBuild()
	switch *output {
	case "json":
		out, _ := json.MarshalIndent(b, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
	case "text":
		c, d := b.Commit, b.BuildDate
		if c == "" {
			c = "unknown"
		}
		if d == "" {
			d = "unknown"
		}
		fmt.Fprintf(stdout, "no8s-agent %s (commit %s, built %s) %s %s\n", b.Version, c, d, b.GoVersion, b.Platform)
	default:
		fmt.Fprintf(stderr, "version: -o must be text or json, not %q\n", *output)
		return exitError
	}
	return exitOK
}
