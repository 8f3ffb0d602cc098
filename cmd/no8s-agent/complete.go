package main

import (
	"context"
	"flag"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s-agent/client"
	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/store"
)

// completionTimeout bounds how long shell completion reads the store or
// asks the agent: the shell waits for it, and offers nothing after.
const completionTimeout = 2 * time.Second

// namesFunc lists completion candidates from an open store.
type namesFunc func(ctx context.Context, st store.Store) ([]string, error)

// namesFromStore lists candidates from the store sf names (--database, or
// --config's database, or the embedded store's default file), within
// completionTimeout. Any failure is no candidates: completion is quiet.
func namesFromStore(ctx context.Context, sf storeFlags, names namesFunc) ([]string, bool) {
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	// Opening a store may block on a database that does not answer; the
	// candidates are dropped when the timeout passes first.
	type result struct {
		names []string
		ok    bool
	}
	done := make(chan result, 1)
	go func() {
		_, st, err := sf.open(ctx)
		if err != nil {
			done <- result{}
			return
		}
		defer st.Close()
		out, err := names(ctx, st)
		done <- result{out, err == nil}
	}()
	select {
	case r := <-done:
		return r.names, r.ok
	case <-ctx.Done():
		return nil, false
	}
}

// sourceNamesIn lists source names; only orphaned ones with orphaned.
func sourceNamesIn(orphaned bool) namesFunc {
	return func(ctx context.Context, st store.Store) ([]string, error) {
		srcs, err := st.ListSources(ctx)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, s := range srcs {
			if !orphaned || s.Phase == store.SourceOrphaned {
				out = append(out, s.Name)
			}
		}
		return out, nil
	}
}

// typeNames lists the resource types' names, once each.
func typeNames(ctx context.Context, st store.Store) ([]string, error) {
	types, err := st.ListResourceTypes(ctx, store.TypeFilter{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range types {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// resourceNames lists the names of the resources get lists: of namespace
// (the store's default when empty) and cluster-scoped, or of every
// namespace with all.
func resourceNames(namespace string, all bool) namesFunc {
	return func(ctx context.Context, st store.Store) ([]string, error) {
		f := store.ResourceFilter{}
		if !all {
			if namespace == "" {
				var err error
				if namespace, err = st.DefaultNamespace(ctx); err != nil {
					return nil, err
				}
			}
			f.Namespaces = []string{namespace, ""}
		}
		rs, err := st.ListResources(ctx, f)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	}
}

// resourceRefsIn lists resources as the verbs take them: KIND/NAME in
// namespace (the store's default when empty) and cluster-scoped ones,
// KIND/NAMESPACE/NAME in the others unless a namespace is given.
func resourceRefsIn(namespace string) namesFunc {
	return func(ctx context.Context, st store.Store) ([]string, error) {
		f := store.ResourceFilter{}
		if namespace != "" {
			f.Namespaces = []string{namespace, ""}
		}
		def, err := st.DefaultNamespace(ctx)
		if err != nil {
			return nil, err
		}
		rs, err := st.ListResources(ctx, f)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, r := range rs {
			if r.Namespace == "" || r.Namespace == def || r.Namespace == namespace {
				out = append(out, r.Kind+"/"+r.Name)
			} else {
				out = append(out, r.Kind+"/"+r.Namespace+"/"+r.Name)
			}
		}
		slices.Sort(out)
		return out, nil
	}
}

// legacyArgNames completes the positional words of get and delete after
// the first: the names of what get reads, the orphaned sources delete
// removes. The command's own flags are parsed from args, for the store
// they name; a flag still waiting for its value (a file, perhaps) is left
// to the shell.
func legacyArgNames(ctx context.Context, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int, name string,
	args []string) ([]cobra.Completion, cobra.ShellCompDirective) {
	fs := flagSetOf(ctx, run)
	if fs == nil {
		return nil, cobra.ShellCompDirectiveDefault
	}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	rest, code := parseFlags(context.Background(), fs, args)
	if code >= 0 {
		return nil, cobra.ShellCompDirectiveDefault
	}
	if len(rest) != 1 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	value := func(flag string) string {
		if f := fs.Lookup(flag); f != nil {
			return f.Value.String()
		}
		return ""
	}
	sf := storeFlags{database: value("database"), config: value("config")}
	var names namesFunc
	switch name {
	case "get":
		object, _ := getObject(rest[0])
		switch object {
		case "types":
			names = typeNames
		case "resources":
			names = resourceNames(value("namespace"), value("A") == "true")
		case "sources":
			names = sourceNamesIn(false)
		}
	case "delete":
		if rest[0] == "source" {
			names = sourceNamesIn(true)
		}
	}
	if names == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out, _ := namesFromStore(ctx, sf, names)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// flagSetOf returns the flag set of a command that parses its own.
func flagSetOf(ctx context.Context, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) *flag.FlagSet {
	var fs *flag.FlagSet
	run(context.WithValue(ctx, flagsWantedKey{}, func(f *flag.FlagSet) { fs = f }), nil, io.Discard, io.Discard)
	return fs
}

// completeNames completes the one argument of a verb that talks to an
// agent: from the store of --config's database, or of the embedded
// store's default file, unless --server names the agent to ask; then from
// the agent. Nothing when neither answers within completionTimeout.
func (f *serverFlags) completeNames(fromStore namesFunc, fromAgent func(ctx context.Context, c *client.Client) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx := cmd.Context()
		if f.server == "" {
			database := ""
			if f.config != "" {
				cfg, err := loadSettings(f.config, config.Flags{})
				if err != nil {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				database = cfg.Database
			}
			if names, ok := namesFromStore(ctx, storeFlags{database: database}, fromStore); ok {
				return names, cobra.ShellCompDirectiveNoFileComp
			}
		}
		ctx, cancel := context.WithTimeout(ctx, completionTimeout)
		defer cancel()
		c, err := f.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names, err := fromAgent(ctx, c)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// sourceNames completes source names.
func sourceNames(sf *serverFlags) cobra.CompletionFunc {
	return sf.completeNames(sourceNamesIn(false), func(ctx context.Context, c *client.Client) ([]string, error) {
		srcs, err := c.ListSources(ctx)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, s := range srcs {
			out = append(out, s.Name)
		}
		return out, nil
	})
}

// resourceRefs completes KIND/NAME (KIND/NAMESPACE/NAME outside the
// default namespace), of -n's namespace when given.
func resourceRefs(sf *serverFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return sf.completeNames(resourceRefsIn(sf.namespace), func(ctx context.Context, c *client.Client) ([]string, error) {
			rs, _, err := c.Resources(ctx, client.ResourceQuery{Namespace: sf.namespace})
			if err != nil {
				return nil, err
			}
			var out []string
			for _, r := range rs {
				out = append(out, r.Ref().String())
			}
			return out, nil
		})(cmd, args, toComplete)
	}
}
