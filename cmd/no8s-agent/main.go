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
	"syscall"
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

// command is one sub-command of the CLI.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"run", "run the agent: keep the configured sources synced into the database", runRun},
		{"validate", "check manifests offline: every problem as file:line: message", runValidate},
		{"diff", "show what syncing a folder as a source would change in the live store", runDiff},
		{"get", "read the store: types, resources, sources, history", runGet},
		{"delete", "remove an orphaned source from the store: forget or prune it", runDelete},
		{"migrate", "apply database migrations and exit", runMigrate},
		{"version", "print the version", runVersion},
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return exitError
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "no8s-agent: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitError
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: no8s-agent <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'no8s-agent <command> --help' for a command's flags.")
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: no8s-agent %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, allowing flags after positional arguments (as in
// "validate examples/repo -o json"), and returns the positional arguments.
// code is non-negative when the command should stop: help was asked for, or
// the flags were wrong.
func parseFlags(fs *flag.FlagSet, args []string) (positional []string, code int) {
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
