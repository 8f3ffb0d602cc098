package codepages

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Release drops the process's mappings of its executable's code and
// read-only data (never its writable data) from its resident set.
func Release() (Released, error) {
	exe, err := os.Executable()
	if err != nil {
		return Released{}, fmt.Errorf("release code pages: %w", err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return Released{}, fmt.Errorf("release code pages: %w", err)
	}
	ranges, err := readOnlyMappings(maps, exe)
	if err != nil {
		return Released{}, fmt.Errorf("release code pages: %w", err)
	}
	var out Released
	for _, r := range ranges {
		// MADV_DONTNEED on a private file mapping that was never written
		// only unmaps its pages: a later touch maps the file's contents
		// again, which for code and read-only data are what was there.
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, r.start, r.end-r.start, syscall.MADV_DONTNEED); errno != 0 {
			return out, fmt.Errorf("release code pages %#x-%#x: %w", r.start, r.end, errno)
		}
		out.Mappings++
		out.Bytes += uint64(r.end - r.start)
	}
	return out, nil
}

// mapping is an address range.
type mapping struct{ start, end uintptr }

// readOnlyMappings returns the ranges of /proc/self/maps (maps) that map
// the file exe private and not writable: its code and read-only data. A
// mapping of a file deleted or replaced since ("(deleted)") is left alone.
func readOnlyMappings(maps []byte, exe string) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) != 6 || fields[5] != exe {
			continue
		}
		perms := fields[1]
		if len(perms) != 4 || perms[0] != 'r' || perms[1] != '-' || perms[3] != 'p' {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			return nil, fmt.Errorf("maps line %q: no range", sc.Text())
		}
		start, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("maps line %q: %w", sc.Text(), err)
		}
		end, err := strconv.ParseUint(hi, 16, 64)
		if err != nil || end <= start {
			return nil, fmt.Errorf("maps line %q: bad range", sc.Text())
		}
		out = append(out, mapping{uintptr(start), uintptr(end)})
	}
	return out, sc.Err()
}
