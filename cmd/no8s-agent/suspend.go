package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// suspendCommand returns `suspend` (suspend true) or `resume`, each with a
// source and a resource object.
func suspendCommand(stdout io.Writer, suspend bool) *cobra.Command {
	var (
		sf     serverFlags
		reason string
	)
	use, short, done := "resume", "resume a suspended source or resource", "resumed"
	if suspend {
		use, short, done = "suspend", "stop syncing a source or reconciling a resource until it is resumed", "suspended"
	}
	src := &cobra.Command{
		Use: "source NAME", Aliases: sourceWords[1:], Short: use + " a source: " + map[bool]string{
			true: "no fetch, no sync", false: "sync it again"}[suspend],
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := sf.client()
			if err != nil {
				return err
			}
			s, err := c.SuspendSource(cmd.Context(), args[0], suspend, reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "source/%s: %s\n", s.Name, suspensionState(done, s.Suspended, s.SuspendedBy))
			return nil
		},
	}
	src.ValidArgsFunction = sourceNames(&sf)
	res := &cobra.Command{
		Use: "resource KIND/NAME", Aliases: resourceWords[1:], Short: use + " a resource (KIND/NAME or KIND/NAMESPACE/NAME): " + map[bool]string{
			true: "no reconcile, no drift check, no destroy", false: "reconcile what waited"}[suspend],
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, r, err := sf.findResource(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			r, err = c.SuspendResource(cmd.Context(), r.ID, suspend, reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s: %s\n", r.Ref(), suspensionState(done, r.Suspended, r.SuspendedBy))
			return nil
		},
	}
	sf.namespaceFlag(res)
	res.ValidArgsFunction = resourceRefs(&sf)
	if suspend {
		// The agent records it with the caller's identity (the token's
		// name), and shows both in describe, the API and the dashboard.
		for _, sub := range []*cobra.Command{src, res} {
			sub.Flags().StringVar(&reason, "reason", "", "why, in up to 500 characters on one line: recorded with who suspended it")
		}
	}
	c := verb(use, short, &sf, src)
	c.AddCommand(res)
	return c
}

// suspensionState says what a suspend or resume left: done, or still
// suspended by something else.
func suspensionState(done string, suspended bool, by string) string {
	if suspended && done == "resumed" {
		return "still suspended by " + by
	}
	if suspended && by != "api" {
		return done + " (by " + by + ")"
	}
	return done
}
