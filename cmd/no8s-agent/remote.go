package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/client"
	"github.com/no8s/no8s-agent/config"
)

// defaultTokenEnv is the variable the API verbs read their token from.
const defaultTokenEnv = "NO8S_TOKEN"

// serverFlags are the flags of commands that talk to a running agent.
type serverFlags struct {
	server, config, tokenEnv string
	timeout                  time.Duration
	// namespace is -n, on the commands that take a resource.
	namespace string
}

func (f *serverFlags) register(c *cobra.Command) {
	fl := c.PersistentFlags()
	fl.StringVar(&f.server, "server", "", "the agent's API, as http://host:port (default: the configuration's listen address, or "+config.DefaultListen+")")
	fl.StringVar(&f.config, "config", "", "agent configuration file, as run takes it: its listen address is the default --server")
	fl.StringVar(&f.tokenEnv, "token-env", defaultTokenEnv, "the environment variable holding the API token")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long --wait waits for the outcome")
}

// client returns a client of the agent the flags name.
func (f *serverFlags) client() (*client.Client, error) {
	server := f.server
	if server == "" {
		listen := config.DefaultListen
		if f.config != "" {
			cfg, err := loadSettings(f.config, config.Flags{})
			if err != nil {
				return nil, err
			}
			if cfg.Listen != "" {
				listen = cfg.Listen
			}
		}
		server = dialAddress(listen)
	}
	token := ""
	if f.tokenEnv != "" {
		token = os.Getenv(f.tokenEnv)
	}
	return client.New(server, token)
}

// dialAddress turns a listen address into one to connect to: an empty or
// wildcard host is this machine.
func dialAddress(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Short names of the objects, as get, describe and the verbs accept them.
var (
	sourceWords   = []string{"source", "sources", "src"}
	resourceWords = []string{"resource", "resources", "res"}
)

func remoteCommands(stdout, stderr io.Writer) []*cobra.Command {
	return []*cobra.Command{syncCommand(stdout, stderr), approveCommand(stdout), reconcileCommand(stdout, stderr),
		suspendCommand(stdout, true), suspendCommand(stdout, false)}
}

// verb returns a command with one object sub-command (source or resource).
func verb(use, short string, sf *serverFlags, object *cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, GroupID: "api", Args: objectArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("say what to %s: %s", use, strings.Join(subNames(cmd), " or "))
		}, SuggestionsMinimumDistance: 2}
	sf.register(c)
	c.AddCommand(object)
	return c
}

// objectArgs refuses an unknown object, suggesting the ones it is close
// to, as cobra does for an unknown command.
func objectArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q: want %s", args[0], cmd.CommandPath(), strings.Join(subNames(cmd), " or "))
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
	}
	return errors.New(msg)
}

func subNames(c *cobra.Command) []string {
	var out []string
	for _, s := range c.Commands() {
		out = append(out, s.Name())
	}
	return out
}

func syncCommand(stdout, stderr io.Writer) *cobra.Command {
	var sf serverFlags
	var wait bool
	src := &cobra.Command{
		Use: "source NAME", Aliases: sourceWords[1:], Short: "fetch and sync a source now",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := sf.client()
			if err != nil {
				return err
			}
			name := args[0]
			if !wait {
				if err := c.Sync(cmd.Context(), name); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "source/%s: sync requested\n", name)
				return nil
			}
			before, err := c.GetSource(cmd.Context(), name)
			if err != nil {
				return err
			}
			var after *api.Source
			err = waitOutcome(cmd.Context(), c, sf.timeout, "", name, func(ctx context.Context) error {
				return c.Sync(ctx, name)
			}, func(ctx context.Context) (bool, error) {
				s, err := c.GetSource(ctx, name)
				if err != nil {
					return false, err
				}
				after = s
				return synced(before, s), nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "source/%s: %s at %s\n", name, after.Phase, orDash(shortRevision(after.LastAttemptedRevision)))
			if after.Phase != "ready" {
				if after.Message != "" {
					fmt.Fprintf(stderr, "  %s\n", oneLine(after.Message))
				}
				return exitCode(exitError)
			}
			return nil
		},
	}
	src.Flags().BoolVar(&wait, "wait", false, "wait for the sync and print its outcome; exit 1 unless the source is ready")
	src.ValidArgsFunction = sourceNames(&sf)
	return verb("sync", "sync a source now", &sf, src)
}

// synced reports whether the source has finished a sync since before.
func synced(before, now *api.Source) bool {
	if now.LastSyncTime == nil {
		return false
	}
	return before.LastSyncTime == nil || now.LastSyncTime.After(*before.LastSyncTime)
}

func approveCommand(stdout io.Writer) *cobra.Command {
	var sf serverFlags
	var revision string
	src := &cobra.Command{
		Use: "source NAME", Aliases: sourceWords[1:], Short: "let a revision the source is stalled on (prune guard, rollback) through",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := sf.client()
			if err != nil {
				return err
			}
			if err := c.Approve(cmd.Context(), args[0], revision); err != nil {
				return err
			}
			what := "the stalled revision"
			if revision != "" {
				what = revision
			}
			fmt.Fprintf(stdout, "source/%s: approved %s\n", args[0], what)
			return nil
		},
	}
	src.Flags().StringVar(&revision, "revision", "", "the revision to approve (default: the one the source is stalled on)")
	src.ValidArgsFunction = sourceNames(&sf)
	return verb("approve", "approve a revision that would prune resources or roll back a signed source", &sf, src)
}

func reconcileCommand(stdout, stderr io.Writer) *cobra.Command {
	var sf serverFlags
	var wait bool
	res := &cobra.Command{
		Use: "resource KIND/NAME", Aliases: resourceWords[1:], Short: "reconcile a resource now (KIND/NAME or KIND/NAMESPACE/NAME)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, r, err := sf.findResource(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			ref := r.Ref().String()
			if !wait {
				if _, err := c.Reconcile(cmd.Context(), r.ID); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "%s: reconcile requested\n", ref)
				return nil
			}
			last, err := c.ResourceHistory(cmd.Context(), r.ID, 1)
			if err != nil {
				return err
			}
			var seen int64
			if len(last) > 0 {
				seen = last[0].ID
			}
			var rec api.ReconcileRecord
			err = waitOutcome(cmd.Context(), c, sf.timeout, r.Kind, r.Source.Name, func(ctx context.Context) error {
				_, err := c.Reconcile(ctx, r.ID)
				return err
			}, func(ctx context.Context) (bool, error) {
				recs, err := c.ResourceHistory(ctx, r.ID, 1)
				if err != nil || len(recs) == 0 || recs[0].ID <= seen {
					return false, err
				}
				rec = recs[0]
				return true, nil
			})
			if err != nil {
				return err
			}
			if !rec.Success {
				msg := "failed"
				if rec.ErrorMessage != nil {
					msg = "failed: " + oneLine(*rec.ErrorMessage)
				}
				fmt.Fprintf(stdout, "%s: generation %d %s\n", ref, rec.Generation, msg)
				return exitCode(exitError)
			}
			fmt.Fprintf(stdout, "%s: generation %d reconciled (%s, %dms)\n", ref, rec.Generation, orDash(rec.Phase), rec.DurationMS)
			return nil
		},
	}
	res.Flags().BoolVar(&wait, "wait", false, "wait for the attempt and print its outcome; exit 1 if it failed")
	sf.namespaceFlag(res)
	res.ValidArgsFunction = resourceRefs(&sf)
	return verb("reconcile", "reconcile a resource now", &sf, res)
}

// findResource returns a client of the agent the flags name and the
// resource ref (KIND/NAME or KIND/NAMESPACE/NAME) names there: without a
// namespace, in -n's, else in the agent's default namespace, or
// cluster-scoped.
func (f *serverFlags) findResource(ctx context.Context, arg string) (*client.Client, *client.Resource, error) {
	ref, err := parseRef(arg, f.namespace)
	if err != nil {
		return nil, nil, err
	}
	c, err := f.client()
	if err != nil {
		return nil, nil, err
	}
	r, err := c.FindResource(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	return c, r, nil
}

// namespaceFlag registers -n/--namespace on a command that takes a
// resource.
func (f *serverFlags) namespaceFlag(c *cobra.Command) {
	c.Flags().StringVarP(&f.namespace, "namespace", "n", "",
		"the namespace of a KIND/NAME (default: the agent's default namespace; KIND/NAMESPACE/NAME names one too)")
}

// pollInterval is how often waitOutcome also asks, in case an event is
// lost (the stream resyncs, or the agent's events lag its history).
const pollInterval = time.Second

// waitOutcome opens the event stream of kind and source, sends the request,
// and checks done after every event of the stream and every pollInterval,
// until done says so, timeout passes or ctx ends.
func waitOutcome(ctx context.Context, c *client.Client, timeout time.Duration, kind, source string,
	request func(context.Context) error, done func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nudge := make(chan struct{}, 1)
	connected := make(chan struct{})
	streamErr := make(chan error, 1)
	// The stream's goroutine ends with ctx, which this function cancels on
	// return.
	go func() {
		streamErr <- c.Events(ctx, kind, source, func() { close(connected) }, func(client.Event) (bool, error) {
			select {
			case nudge <- struct{}{}:
			default:
			}
			return true, nil
		})
	}()
	// The stream is open before the request, so the outcome cannot slip
	// by; should it not open, polling alone decides.
	select {
	case <-connected:
	case err := <-streamErr:
		streamErr <- err
	case <-ctx.Done():
		return fmt.Errorf("no outcome within %v: %w", timeout, ctx.Err())
	}
	timedOut := func(err error) error {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("no outcome within %v: %w", timeout, err)
		}
		return err
	}
	if err := request(ctx); err != nil {
		return timedOut(err)
	}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ok, err := done(ctx)
		if err != nil {
			return timedOut(err)
		}
		if ok {
			return nil
		}
		select {
		case <-nudge:
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("no outcome within %v", timeout)
		}
	}
}

// printJSON writes v indented.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
