package terraform

import (
	"fmt"
	"testing"
)

// lockError takes the holder's lock id from the http backend's message when
// the binary prints its own request's lock info beside it (as binaries whose
// http backend reports the request's info do), and names no holder when the
// server described no lock.
func TestLockErrorHolder(t *testing.T) {
	const info = "Lock Info:\n  ID:        %s\n  Path:      \n  Operation: OperationTypePlan\n  Who:       me@here\n  Version:   1.9.0\n"
	for _, tt := range []struct {
		name, output string
		want         lockInfo
	}{
		{"holder's info printed", "Error: Error acquiring the state lock\n\nError message: HTTP remote state already locked: ID=held-1\n" +
			fmt.Sprintf(info, "held-1"), lockInfo{id: "held-1", who: "me@here"}},
		{"request's info printed", "Error: Error acquiring the state lock\n\nError message: HTTP remote state already locked: ID=held-2\n" +
			fmt.Sprintf(info, "mine-2"), lockInfo{id: "held-2"}},
		{"no lock info from the server", "Error: Error acquiring the state lock\n\nError message: HTTP remote state already locked, failed to unmarshal body\n" +
			fmt.Sprintf(info, "mine-3"), lockInfo{}},
		{"another backend", "Error: Error acquiring the state lock\n\nError message: resource temporarily unavailable\n" +
			fmt.Sprintf(info, "held-4"), lockInfo{id: "held-4", who: "me@here"}},
		{"an empty id", "Error: Error acquiring the state lock\n\nLock Info:\n  ID:        \n  Path:      \n", lockInfo{}},
	} {
		got, locked := lockError(&runError{output: tt.output})
		if !locked || got != tt.want {
			t.Errorf("%s: lockError = %+v, %v; want %+v", tt.name, got, locked, tt.want)
		}
	}
	if _, locked := lockError(&runError{output: "Error: something else"}); locked {
		t.Error("an error that is no lock error is taken for one")
	}
}
