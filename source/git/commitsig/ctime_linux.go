package commitsig

import (
	"io/fs"
	"syscall"
	"time"
)

// changeTime is the file's status change time, which every write and every
// change of its modification time moves, and which no one can set back.
func changeTime(info fs.FileInfo) (time.Time, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(st.Ctim.Sec, st.Ctim.Nsec), true
}
