package api

import (
	"net"
	"net/http"
	"strings"
)

// hostGuard refuses requests whose Host header the agent does not answer
// to, against DNS rebinding: a page of evil.example whose name its owner
// then points at 127.0.0.1 makes the browser send the agent requests it
// treats as same-origin with the page, so that the page reads the answers;
// they carry Host: evil.example. An agent listening on a loopback address
// answers only loopback names and addresses (localhost, 127.0.0.0/8, ::1),
// the address the request arrived on, and AllowedHosts; one listening
// elsewhere checks the Host only when AllowedHosts is set. Every route is
// behind it, health and webhooks included: probes on the same host send
// a loopback Host, and probes from elsewhere the address they connect to.
// A request without a Host (HTTP/1.0) is answered: browsers always send one.
func (s *Server) hostGuard(listen net.Addr, h http.Handler) http.Handler {
	tcp, ok := listen.(*net.TCPAddr)
	loopback := ok && tcp.IP.IsLoopback()
	if !loopback && len(s.opts.AllowedHosts) == 0 {
		return h
	}
	allowed := make([]allowedHost, 0, len(s.opts.AllowedHosts))
	for _, a := range s.opts.AllowedHosts {
		host, port := splitHost(a)
		allowed = append(allowed, allowedHost{host: host, port: port})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "" || hostAllowed(r, allowed) {
			h.ServeHTTP(w, r)
			return
		}
		// Debug, not more: anyone can send these, as often as they like.
		s.log.Debug("request for another host refused", "host", r.Host, "method", r.Method, "path", r.URL.Path)
		why := "it listens on a loopback address and answers only localhost, 127.0.0.1 or [::1]"
		if !loopback {
			why = "it answers only the names in api.allowedHosts, loopback names and the address it is reached at"
		}
		s.writeError(w, r, errorf(http.StatusMisdirectedRequest,
			"this agent does not answer to host %q: %s; if this is the name clients use, add it to api.allowedHosts", r.Host, why), nil)
	})
}

// allowedHost is an entry of AllowedHosts; port "" is any port.
type allowedHost struct{ host, port string }

// hostAllowed reports whether r's Host is a loopback name or address, the
// address r arrived on, or one of allowed.
func hostAllowed(r *http.Request, allowed []allowedHost) bool {
	host, port := splitHost(r.Host)
	if strings.Trim(port, "0123456789") != "" {
		// No browser sends it: not a Host to read a name out of.
		return false
	}
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() {
			return true
		}
		// An address is no name anyone can point elsewhere: the request
		// names the address it was sent to, as a probe from another host does.
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok && local.IP.Equal(ip) {
			return true
		}
	}
	for _, a := range allowed {
		if a.host == host && (a.port == "" || a.port == port) {
			return true
		}
	}
	return false
}

// splitHost splits a Host header or an AllowedHosts entry into its host,
// lower-case, without brackets or a final dot, and its port, "" when none.
func splitHost(hostport string) (host, port string) {
	host = hostport
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), "."), port
}
