//go:build !linux

package terraform

import "syscall"

// procAttr starts the binary in its own process group. Elsewhere than on
// Linux it outlives a killed agent.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// startTime is unknown elsewhere than on Linux: a previous run is never
// proven gone, so its lock is never forced.
func startTime(int) (start string, known bool) { return "", false }
