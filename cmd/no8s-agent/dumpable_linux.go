package main

import "golang.org/x/sys/unix"

// hideFromActions makes the agent's /proc entries root's: the commands
// its actions run share its user, and would otherwise read its
// environment, which holds the secrets the configuration names, from
// /proc/<agent>/environ, or its memory. The commands themselves are
// dumpable again after their exec, so nothing else changes for them.
func hideFromActions() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
