//go:build !linux

package main

// hideFromActions has nothing to do where no /proc shows a process's
// environment to its user's other processes.
func hideFromActions() error { return nil }
