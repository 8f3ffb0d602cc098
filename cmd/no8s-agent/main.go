// Command no8s-agent is a GitOps agent for places without Kubernetes: it
// validates manifests from Git or a folder, stores them as generations in a
// database and reconciles the world toward them through action plugins.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes shared by every command.
const (
	exitOK    = 0
	exitError = 1
)

// exitCode is an error that ends a command with a given exit status, its
// message (if any) already written.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// run executes the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(doubleDash(root, args))
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintf(stderr, "no8s-agent: %v\n", err)
	if strings.HasPrefix(err.Error(), "unknown command") {
		fmt.Fprintln(stderr, "Run 'no8s-agent --help' for the commands.")
	}
	return exitError
}

// doubleDash rewrites -name to --name for the long flags of the command
// args run, so that -flag works for every command as it always has for the
// older ones (whose own parser takes both).
func doubleDash(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd.DisableFlagParsing {
		return args
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if len(name) > 1 && (cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil) {
			out[i] = "-" + a
		}
	}
	return out
}

// newRoot builds the command tree, one group of verbs per file.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "no8s-agent",
		Short: "A GitOps agent without Kubernetes",
		Long: "no8s-agent keeps sources (Git repositories or folders) synced into a database and reconciles\n" +
			"every resource they declare through its action. Commands that read the store take --database or\n" +
			"--config; commands that act on a running agent talk to its HTTP API (--server, default from the\n" +
			"configuration's listen address).",
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command: the help, and failure, as a script that
		// forgot the command should notice.
		// An unknown command is answered by cobra, with the commands it
		// is close to.
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return exitCode(exitError)
		},
		SuggestionsMinimumDistance: 2,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetHelpCommandGroupID("")
	root.CompletionOptions.HiddenDefaultCmd = false
	root.AddGroup(&cobra.Group{ID: "agent", Title: "Running and checking:"},
		&cobra.Group{ID: "store", Title: "Reading and changing the store:"},
		&cobra.Group{ID: "api", Title: "Acting on a running agent (over its HTTP API):"})

	for _, c := range legacyCommands() {
		root.AddCommand(c.cobra(stdout, stderr))
	}
	root.AddCommand(remoteCommands(stdout, stderr)...)
	root.AddCommand(describeCommand(stdout, stderr))
	root.AddCommand(versionCommand(stdout))
	root.AddCommand(healthcheckCommand(stdout, stderr))
	return root
}

// legacyCommand is a command whose flags the standard library parses, so
// that both -flag and --flag spellings keep working as they always have.
type legacyCommand struct {
	name, group, summary string
	run                  func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	// complete offers the positional words, when the command has any.
	complete []string
}

func legacyCommands() []legacyCommand {
	return []legacyCommand{
		{"run", "agent", "run the agent: keep the configured sources synced into the database", runRun, nil},
		{"validate", "agent", "check manifests offline: every problem as file:line: message", runValidate, nil},
		{"diff", "agent", "show what syncing a folder as a source would change in the live store", runDiff, nil},
		{"get", "store", "read the store: types, resources, sources, history, agents (-w: watch the agent)", runGet, getObjectWords()},
		{"delete", "store", "remove an orphaned source from the store: forget or prune it", runDelete, []string{"source"}},
		{"migrate", "store", "apply database migrations and exit", runMigrate, nil},
	}
}

func (l legacyCommand) cobra(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:     l.name,
		Short:   l.summary,
		GroupID: l.group,
		// The command parses its own flags (and --help, to stdout).
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := l.run(cmd.Context(), args, stdout, stderr); code != exitOK {
				return exitCode(code)
			}
			return nil
		},
	}
	c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if strings.HasPrefix(toComplete, "-") {
			return flagsOf(cmd.Context(), l.run), cobra.ShellCompDirectiveNoFileComp
		}
		if l.complete == nil {
			return nil, cobra.ShellCompDirectiveDefault
		}
		if len(args) > 0 {
			// The names of what the first word picks, from the store the
			// flags name.
			return legacyArgNames(cmd.Context(), l.run, l.name, args)
		}
		return l.complete, cobra.ShellCompDirectiveNoFileComp
	}
	return c
}

// newFlags returns a flag set that reports errors instead of exiting. Its
// usage goes to stdout when asked for with -h or --help, and to stderr
// after a mistake in the flags.
func newFlags(name, synopsis string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	errOut := &markWriter{w: stderr}
	fs.SetOutput(errOut)
	fs.Usage = func() {
		// The flag package writes the mistake before it calls Usage; a
		// help request writes nothing first.
		w := io.Writer(stdout)
		if errOut.wrote {
			w = stderr
		}
		fmt.Fprintf(w, "Usage: no8s-agent %s\n\n", synopsis)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(errOut)
	}
	return fs
}

// flagsWantedKey marks a context in which a command only shows its flag
// set (to the function the value holds) and stops: the shell completion
// of commands that parse their own flags.
type flagsWantedKey struct{}

// flagsOf returns the flags of a command that parses its own, as
// completions ("--name" and its usage).
func flagsOf(ctx context.Context, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) []cobra.Completion {
	var out []cobra.Completion
	fs := flagSetOf(ctx, run)
	if fs == nil {
		return nil
	}
	fs.VisitAll(func(f *flag.Flag) {
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		out = append(out, cobra.CompletionWithDesc(dash+f.Name, strings.SplitN(f.Usage, "\n", 2)[0]))
	})
	return out
}

// markWriter remembers whether anything was written through it.
type markWriter struct {
	w     io.Writer
	wrote bool
}

func (m *markWriter) Write(p []byte) (int, error) {
	m.wrote = true
	return m.w.Write(p)
}

// parseFlags parses args, allowing flags after positional arguments (as in
// "validate examples/repo -o json"), and returns the positional arguments.
// code is non-negative when the command should stop: help was asked for, or
// the flags were wrong.
func parseFlags(ctx context.Context, fs *flag.FlagSet, args []string) (positional []string, code int) {
	if show, ok := ctx.Value(flagsWantedKey{}).(func(*flag.FlagSet)); ok {
		show(fs)
		return nil, exitOK
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK
			}
			return nil, exitError
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, -1
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), -1
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}
