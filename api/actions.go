package api

import (
	"errors"
	"net/http"

	"github.com/no8s/no8s-agent/action"
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
