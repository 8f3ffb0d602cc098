package api

import (
	"context"
	"net/http"
	"time"
)

// healthz answers while the process serves requests.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when the store is reachable and its schema current,
// 503 otherwise. /health, the predecessor's check, is the same.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		// The error may name the database's host and user: logged, not shown.
		s.log.Warn("not ready", "error", err)
		w.Header().Set("Retry-After", retryAfter)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable",
			"store": "unreachable, or its schema is not current; the agent's log says which"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "healthy", "store": "ok"})
}
