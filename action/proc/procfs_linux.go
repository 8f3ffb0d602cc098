package proc

import (
	"os"
	"strconv"
	"strings"
)

// procStat is what the agent reads of a process's /proc/<pid>/stat.
type procStat struct {
	state      string
	ppid, pgrp int
}

// ended reports whether the process has ended: a zombie has, it only
// waits to be reaped, by a parent that may be slow to do it.
func (s procStat) ended() bool { return s.state == "Z" || s.state == "X" }

// readStat reads /proc/<pid>/stat; false when the process is gone or its
// line cannot be read.
func readStat(pid string) (procStat, bool) {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after its closing parenthesis. state is field 3, ppid field 4, pgrp
	// field 5.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return procStat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, false
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return procStat{}, false
	}
	return procStat{state: f[0], ppid: ppid, pgrp: pgrp}, true
}

// liveProcesses returns the processes in /proc that have not ended, by
// pid.
func liveProcesses() (map[int]procStat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]procStat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readStat(e.Name())
		if !ok || st.ended() {
			continue // gone meanwhile, or over
		}
		out[pid] = st
	}
	return out, nil
}

// GroupMembers lists the processes of group pgid that have not ended (a
// zombie has: only its reaping is left). It fails when /proc cannot be
// read.
func GroupMembers(pgid int) ([]int, error) {
	procs, err := liveProcesses()
	if err != nil {
		return nil, err
	}
	var out []int
	for pid, st := range procs {
		if st.pgrp == pgid {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Running reports whether pid is a process that has not ended.
func Running(pid int) bool {
	st, ok := readStat(strconv.Itoa(pid))
	return ok && !st.ended()
}
