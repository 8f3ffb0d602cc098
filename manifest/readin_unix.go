//go:build unix

package manifest

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// readIn reads the regular file name in the open folder dir, up to limit
// bytes, with plain system calls: an os.File per file costs several more
// (non-blocking mode, the poller), which in a folder of thousands of small
// manifests cost more than the reads. The file is opened without following
// a symlink, so that a file replaced by a link since the walk cannot lead
// anywhere. ok is false when the file must be read the usual way.
func readIn(dir *os.File, name string, l sizeLimit) (data []byte, msg string, ok bool) {
	limit := l.max
	// SyscallConn, not Fd: Fd would put the folder in blocking mode and
	// give up the runtime's hold on the descriptor.
	rc, err := dir.SyscallConn()
	if err != nil {
		return nil, "", false
	}
	var fd int
	var openErr error
	if err := rc.Control(func(dirfd uintptr) {
		for {
			fd, openErr = unix.Openat(int(dirfd), name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
			if !errors.Is(openErr, unix.EINTR) {
				return
			}
		}
	}); err != nil {
		return nil, "", false
	}
	if openErr != nil {
		if errors.Is(openErr, unix.ELOOP) {
			return nil, "cannot read: it became a symlink while the tree was read", true
		}
		return nil, fmt.Sprintf("cannot read: %v", openErr), true
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Sprintf("cannot read: %v", err), true
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, "cannot read: not a regular file", true
	}
	if st.Size > limit {
		return nil, l.refuse(st.Size), true
	}
	// The size it says is what is read: a file written to while the tree is
	// read is a race whichever bytes come back, and the read that would see
	// the end costs a call per file. A file that says 0 bytes is read to its
	// end, in case it does not know its size.
	buf := make([]byte, 0, st.Size+1)
	for int64(len(buf)) <= limit {
		if st.Size > 0 && int64(len(buf)) == st.Size {
			return buf, "", true
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Sprintf("cannot read: %v", err), true
		}
		if n == 0 {
			return buf, "", true
		}
		buf = buf[:len(buf)+n]
	}
	return nil, l.refuse(-1), true
}
