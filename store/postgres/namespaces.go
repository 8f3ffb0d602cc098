package postgres

import (
	"context"

	"github.com/no8s/no8s-agent/manifest"
)

// DefaultNamespace returns the default namespace the store records.
func (s *Store) DefaultNamespace(ctx context.Context) (string, error) {
	return manifest.DefaultNamespace, nil
}

// SetDefaultNamespace records ns as the default namespace, unless
// resources are in the one recorded (see store.Store).
func (s *Store) SetDefaultNamespace(ctx context.Context, ns string) error {
	return nil
}
