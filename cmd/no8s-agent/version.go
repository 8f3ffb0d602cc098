package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Stamped by `make build` with -ldflags "-X main.version=... -X
// main.commit=... -X main.buildDate=...". Left empty, they come from the
// module and VCS information the go command records in the binary.
var (
	version   = ""
	commit    = ""
	buildDate = ""
)

// buildInfo is what `version` prints.
type buildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// currentBuild returns the stamped build information, filled in from the
// binary's own build settings where nothing was stamped.
func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, BuildDate: buildDate, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if ok {
		if b.Version == "" && info.Main.Version != "" {
			b.Version = info.Main.Version
		}
		modified := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				if b.BuildDate == "" {
					b.BuildDate = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && commit == "" && b.Commit != "" {
			b.Commit += "-dirty"
		}
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	return b
}

func versionString() string { return currentBuild().Version }

func versionCommand(stdout io.Writer) *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:     "version",
		Short:   "print the version, commit and build date",
		GroupID: "agent",
		Args:    cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			b := currentBuild()
			switch output {
			case "json":
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(b)
			case "", "text":
				c, d := b.Commit, b.BuildDate
				if c == "" {
					c = "unknown"
				}
				if d == "" {
					d = "unknown"
				}
				fmt.Fprintf(stdout, "no8s-agent %s (commit %s, built %s) %s %s\n", b.Version, c, d, b.GoVersion, b.Platform)
				return nil
			}
			return fmt.Errorf("-o must be text or json, not %q", output)
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]cobra.Completion{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}
