package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s-agent/config"
)

// healthcheckCommand probes a running agent's health endpoint and exits 0
// when it answers 2xx, 1 otherwise. Container images have no shell or curl
// to run a health check with: the agent's binary is the probe.
func healthcheckCommand(stdout, stderr io.Writer) *cobra.Command {
	var url string
	var timeout time.Duration
	c := &cobra.Command{
		Use:     "healthcheck",
		Short:   "probe a running agent's /healthz (or --url): exit 0 when it answers 2xx, 1 otherwise",
		GroupID: "agent",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			// What it prints goes to the container's stored health log:
			// never the URL's password.
			u, err := neturl.Parse(url)
			if err != nil || u.Host == "" {
				return fmt.Errorf("--url is not an absolute URL")
			}
			shown := u.Redacted()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
			if err != nil {
				return fmt.Errorf("--url %s: %w", shown, err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				fmt.Fprintf(stderr, "healthcheck: %v\n", err)
				return exitCode(exitError)
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			if resp.StatusCode/100 != 2 {
				fmt.Fprintf(stderr, "healthcheck: %s answered %s\n", shown, resp.Status)
				return exitCode(exitError)
			}
			fmt.Fprintf(stdout, "%s: %s\n", shown, resp.Status)
			return nil
		},
	}
	c.Flags().StringVar(&url, "url", "http://"+config.DefaultListen+"/healthz", "the endpoint to probe (/readyz also checks the store)")
	c.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return c
}
