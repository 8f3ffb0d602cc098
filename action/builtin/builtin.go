// Package builtin assembles the action plugins compiled into the agent. It
// is separate from package action because the plugins import action: the
// registry cannot import them itself.
package builtin

import (
	"fmt"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/exec"
	"github.com/no8s/no8s-agent/action/githubactions"
	"github.com/no8s/no8s-agent/action/gitlabpipelines"
	httpaction "github.com/no8s/no8s-agent/action/http"
	"github.com/no8s/no8s-agent/action/terraform"
)

// Registry returns a registry holding the plugins compiled into the agent:
// noop, exec, http, github_actions, gitlab_pipelines and terraform.
func Registry() *action.Registry {
	r := action.NewRegistry()
	for _, p := range []struct {
		name    string
		factory action.Factory
	}{
		{exec.Plugin, exec.New},
		{httpaction.Plugin, httpaction.New},
		{githubactions.Plugin, githubactions.New},
		{gitlabpipelines.Plugin, gitlabpipelines.New},
		{terraform.Plugin, terraform.New},
	} {
		if err := r.Register(p.name, p.factory); err != nil {
			// Only two built-in plugins sharing a name can cause this: a bug
			// that every test run catches.
			panic(fmt.Sprintf("builtin: %v", err))
		}
	}
	return r
}
