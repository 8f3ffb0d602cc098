//go:build linux

package terraform

import (
	"os"
	"strconv"
	"strings"
)

// startTime returns the start time of process pid (in clock ticks since
// boot), which tells it from a later process given the same pid; "" when
// there is no such process. known is false when this cannot be told.
func startTime(pid int) (start string, known bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if os.IsNotExist(err) {
		return "", true
	}
	if err != nil {
		return "", false
	}
	// The command name, in parentheses, may hold spaces: count fields after
	// its closing parenthesis. starttime is field 22; state is field 3.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return "", false
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return "", true // a zombie has ended
	}
	return fields[19], true
}

// bootID tells this boot of the kernel from any other, of this machine or
// another; "" when unknown.
var bootID = func() string {
	raw, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}()

// pidNamespace is the agent's PID namespace ("pid:[4026531836]"), in which
// the pids it records mean its processes; "" when unknown.
var pidNamespace = func() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return ns
}()
