//go:build !linux

package terraform

// startTime is unknown elsewhere than on Linux: a previous run is never
// proven gone, so its lock is never forced.
func startTime(int) (start string, known bool) { return "", false }

// bootID and pidNamespace are unknown elsewhere than on Linux.
var bootID, pidNamespace = "", ""
