//go:build !linux

package codepages

// Release does nothing where the mappings cannot be read.
func Release() (Released, error) { return Released{}, nil }
