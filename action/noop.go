package action

import (
	"context"
	"fmt"
)

// noop is the built-in plugin that changes nothing. It lets a resource be
// tracked, validated and shown without an action behind it, and gives
// benchmarks a way to measure the reconciler alone. It is not a Planner: it
// observes nothing, so it never reports drift.
type noop struct{}

// newNoop is noop's Factory. noop has no settings; accepting any would let
// a typo pass silently.
func newNoop(s Settings) (Action, error) {
	if err := s.DecodeConfig(&struct{}{}); err != nil {
		return nil, fmt.Errorf("plugin noop takes no settings: %w", err)
	}
	return noop{}, nil
}

// Apply implements Action.
func (noop) Apply(context.Context, *Request) (*Result, error) {
	return &Result{Message: "nothing to do"}, nil
}

// Destroy implements Action.
func (noop) Destroy(context.Context, *Request) (*Result, error) {
	return &Result{Message: "nothing to do"}, nil
}
