// Package memprofile switches off the runtime's sampling of heap
// allocations as the program starts, unless its command line asks for
// profiles (--pprof): the samples feed only /debug/pprof/heap, yet the
// runtime keeps a 1.4 MB table of their call stacks, and the stacks
// themselves, for the life of the process.
//
// It imports nothing that allocates at initialisation, so that it runs
// before the packages that do: sampling starts with the first allocations.
package memprofile

import (
	"os"
	"runtime"
	"strings"
)

// defaultRate is the runtime's sampling rate, restored by Enable.
var defaultRate = runtime.MemProfileRate

// off is true while init's choice holds.
var off bool

func init() {
	if Wanted(os.Args[1:]) || strings.Contains(os.Getenv("GODEBUG"), "memprofilerate") {
		return
	}
	runtime.MemProfileRate = 0
	off = true
}

// Wanted reports whether args turn profiling on: --pprof or -pprof, alone
// or with a true value, before any "--" that ends the flags.
func Wanted(args []string) bool {
	on := false
	for _, a := range args {
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if name != "pprof" || !strings.HasPrefix(a, "-") {
			continue
		}
		switch {
		case !hasVal:
			on = true
		case val == "1" || val == "t" || val == "T" || val == "true" || val == "TRUE" || val == "True":
			on = true
		default:
			on = false
		}
	}
	return on
}

// Enable turns sampling back on if init switched it off, for a program
// that turns profiling on by other means than its command line: heap
// profiles then cover what is allocated from that moment.
func Enable() {
	if off {
		runtime.MemProfileRate = defaultRate
		off = false
	}
}
