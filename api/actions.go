package api

import (
	"cmp"
	"errors"
	"net/http"
	"slices"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/store"
)

// Actions are the action instances API writes may name.
type Actions interface {
	// Resolve returns the instance a write names: an instance, or the
	// plugin of exactly one; otherwise an error wrapping
	// action.ErrUnknownInstance.
	Resolve(name string) (action.Instance, error)
	// List returns the instances, by name.
	List() []action.Instance
}

// matchingActions returns the action names stored in resources that are
// bound to an instance whose name or plugin is name: the names of those
// instances, and the name of the plugin of each that is its plugin's only
// instance (a resource written with the plugin's name runs under it; see
// Resolve). name itself is always among them, so that resources bound to
// no configured instance are found by the name they were written with.
func matchingActions(acts Actions, name string) []string {
	out := []string{name}
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, i := range acts.List() {
		if i.Name != name && i.Plugin != name {
			continue
		}
		add(i.Name)
		if r, err := acts.Resolve(i.Plugin); err == nil && r.Name == i.Name {
			add(i.Plugin)
		}
	}
	return out
}

// ActionInstance is an action instance in GET /api/v1/plugins/actions: its
// name and plugin, never its settings.
type ActionInstance struct {
	Name   string `json:"name"`
	Plugin string `json:"plugin"`
}

func (s *Server) listActions(w http.ResponseWriter, _ *http.Request) error {
	out := []ActionInstance{}
	if s.opts.Actions != nil {
		for _, i := range s.opts.Actions.List() {
			out = append(out, ActionInstance{Name: i.Name, Plugin: i.Plugin})
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// checkAction refuses with a 400 on the field action_plugin a write that
// names no action instance. The name is stored as given: the plugin of one
// instance (the predecessor's github_actions) stays so, and stands for
// that instance wherever instances are looked up.
func (s *Server) checkAction(name string) error {
	if s.opts.Actions == nil || name == "" {
		return nil
	}
	_, err := s.opts.Actions.Resolve(name)
	if errors.Is(err, action.ErrUnknownInstance) {
		msg := "action_plugin: " + err.Error()
		return &Error{Status: http.StatusBadRequest, Message: msg,
			Details: []Detail{{Field: "action_plugin", Pointer: "/action_plugin", Message: msg}}}
	}
	return err
}

// checkPluginConfig refuses plugin configuration that the resource's
// action (its own or its type's default) would ignore.
func (s *Server) checkPluginConfig(d resourceDraft, t *store.ResourceType) error {
	if len(d.pluginConfig) == 0 || s.opts.Actions == nil {
		return nil
	}
	name := cmp.Or(d.action, t.Action, action.Noop)
	inst, err := s.opts.Actions.Resolve(name)
	switch {
	case errors.Is(err, action.ErrUnknownInstance):
		// Only a type's default can be unknown here (checkAction refused
		// the request's own); its resources fail saying so.
		return nil
	case err != nil:
		return err
	}
	if err := action.CheckPluginConfig(inst, d.pluginConfig); err != nil {
		msg := "plugin_config: " + err.Error()
		return &Error{Status: http.StatusBadRequest, Message: msg,
			Details: []Detail{{Field: "plugin_config", Pointer: "/plugin_config", Message: msg}}}
	}
	return nil
}
