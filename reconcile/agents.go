package reconcile

import (
	"context"
	"os"
	"time"

	"github.com/no8s/no8s-agent/store"
)

// agentForgetAfter is how long a gone agent stays listed.
const agentForgetAfter = 24 * time.Hour

// beat records the agent at once and every store.AgentBeat until ctx is done,
// and now and then forgets the agents gone for a day.
func (c *Controller) beat(ctx context.Context) {
	host, _ := os.Hostname()
	a := &store.Agent{ID: c.opts.AgentID, Host: host, Version: c.opts.Version, StartedAt: time.Now()}
	tick := time.NewTicker(store.AgentBeat)
	defer tick.Stop()
	for n := 0; ; n++ {
		if err := c.store.RecordAgent(ctx, a); err != nil && ctx.Err() == nil {
			c.log.Warn("recording this agent's heartbeat failed", "error", err)
		}
		if n%720 == 0 { // hourly
			if _, err := c.store.ForgetAgents(ctx, agentForgetAfter); err != nil && ctx.Err() == nil {
				c.log.Warn("forgetting agents gone for a day failed", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
