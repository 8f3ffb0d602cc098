package reconcile

import (
	"context"
	"os"
	"time"

	"github.com/no8s/no8s-agent/store"
)

// agentForgetAfter is how long a stopped or gone agent stays listed.
const agentForgetAfter = 24 * time.Hour

// beat records the agent at once and every store.AgentBeat until ctx is done,
// and now and then forgets the agents stopped or gone for a day.
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
				c.log.Warn("forgetting agents stopped or gone for a day failed", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// stopped records that this agent shut down cleanly, once its work is handed
// back, so that it is listed as stopped rather than gone: gone is for an
// agent that vanished, which an operator should look into.
func (c *Controller) stopped() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.store.StopAgent(ctx, c.opts.AgentID); err != nil {
		c.log.Warn("recording this agent's clean stop failed; it is listed as gone", "error", err)
	}
}
