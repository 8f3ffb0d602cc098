//go:build !unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
)

// lockFile is not implemented where flock is missing: an exclusive Open
// fails rather than run unprotected.
func lockFile(path string) (*os.File, error) {
	return nil, fmt.Errorf("sqlite: lock %s: exclusive open: %w", path, errors.ErrUnsupported)
}

// unlockFile closes f.
func unlockFile(f *os.File) { f.Close() }
