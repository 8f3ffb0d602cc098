package main

import (
	"io"
	gosync "sync"
)

// lockedWriter serialises writes from the agent's goroutines.
type lockedWriter struct {
	mu gosync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
