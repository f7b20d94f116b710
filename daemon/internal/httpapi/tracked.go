package httpapi

import (
	"net"
	"net/http"
	"sync"
)

// TrackedServer is net/http's server with its connections followed, so
// that a drain can close those that carry no request at once
// (CloseQuiet). NewTrackedServer sets the server's ConnState.
type TrackedServer struct {
	*http.Server
	mu    sync.Mutex
	conns map[net.Conn]http.ConnState
}

// NewTrackedServer follows the connections of s, whose ConnState it
// replaces.
func NewTrackedServer(s *http.Server) *TrackedServer {
	t := &TrackedServer{Server: s}
	s.ConnState = t.track
	return t
}

func (t *TrackedServer) track(c net.Conn, s http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s {
	case http.StateHijacked, http.StateClosed:
		delete(t.conns, c)
	default:
		if t.conns == nil {
			t.conns = map[net.Conn]http.ConnState{}
		}
		t.conns[c] = s
	}
}

// CloseQuiet closes the connections with no request under way: idle
// keep-alive connections and new ones that have not sent a request yet.
func (t *TrackedServer) CloseQuiet() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c, s := range t.conns {
		if s == http.StateNew || s == http.StateIdle {
			_ = c.Close()
			delete(t.conns, c)
		}
	}
}
