package daemon

import (
	"net"
	"net/http"
	"sync"
)

// connTracker follows the API server's connections (http.Server.ConnState)
// so that a drain can close those that carry no request at once.
type connTracker struct {
	mu    sync.Mutex
	conns map[net.Conn]http.ConnState
}

func (t *connTracker) track(c net.Conn, s http.ConnState) {
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

// closeQuiet closes the connections with no request under way: idle
// keep-alive connections and new ones that have not sent a request yet.
func (t *connTracker) closeQuiet() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c, s := range t.conns {
		if s == http.StateNew || s == http.StateIdle {
			_ = c.Close()
			delete(t.conns, c)
		}
	}
}
