//go:build !unix

package manifest

import "os"

// readIn is readLimited's faster path on Unix; elsewhere files are read
// the usual way.
func readIn(*os.File, string, sizeLimit) ([]byte, string, bool) { return nil, "", false }
