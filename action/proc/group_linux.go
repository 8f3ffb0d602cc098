package proc

// liveMember reports whether a process of group pgid is not a zombie. When
// /proc cannot be read it assumes one is.
func liveMember(pgid int) bool {
	pids, err := GroupMembers(pgid)
	return err != nil || len(pids) > 0
}
