package redact

import (
	"net/http"
	"unsafe"
)

// HTTP returns a handler that masks what next writes: every header value
// and every piece of the body, as it is written. Bodies are masked a
// Write at a time, which holds a whole value for everything the agent
// serves (encoding/json and html/template write each value in one piece,
// events are written one at a time); buffering instead would hold back
// event streams. Content-Length is dropped when there are secrets to
// mask, since masking changes the length, and the request's
// Accept-Encoding too, so that no handler compresses what has to be read
// (the metrics handler gzips for clients that accept it).
//
// Without secrets, next serves the request unwrapped.
func (m *Masker) HTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := m.table()
		if t.empty() {
			next.ServeHTTP(w, r)
			return
		}
		r.Header.Del("Accept-Encoding")
		next.ServeHTTP(&responseWriter{ResponseWriter: w, t: t}, r)
	})
}

// responseWriter masks a response. It keeps the Flusher of the writer it
// wraps, and Unwrap lets http.ResponseController reach the connection.
type responseWriter struct {
	http.ResponseWriter
	t           *table
	wroteHeader bool
}

func (w *responseWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		h := w.Header()
		h.Del("Content-Length")
		for _, values := range h {
			for i, v := range values {
				values[i] = w.t.mask(v)
			}
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return w.ResponseWriter.Write(p)
	}
	// p is read where it lies rather than copied: a page of resources is
	// hundreds of kilobytes, and copying every answer to scan it made the
	// collector's work grow with the reads. s is used only while Write
	// runs, and what goes out is p itself or a masked copy.
	s := unsafe.String(unsafe.SliceData(p), len(p))
	masked := w.t.mask(s)
	if len(masked) == len(s) && unsafe.StringData(masked) == unsafe.StringData(s) {
		return w.ResponseWriter.Write(p)
	}
	if _, err := w.ResponseWriter.Write([]byte(masked)); err != nil {
		return 0, err
	}
	// The caller wrote p; that it reached the client shorter is not its
	// concern.
	return len(p), nil
}

// Flush sends what is buffered, for event streams.
func (w *responseWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
