// Package h1 is the daemon's HTTP/1.x server for plain connections: an
// http.Handler served with the semantics the API needs from net/http's
// server (keep-alive, Content-Length and chunked bodies, "100 Continue",
// header and body timeouts, graceful shutdown, the request's context ended
// when its client goes away during a long request) at a fraction of its
// cost per request.
//
// Why not net/http's server: on the daemon's hot path (an acquire and a
// release of a pool slot, a small JSON body each way) its per-request work
// — a goroutine and about five deadline changes per request to watch for
// the client going away, a header map and response objects allocated per
// request, the bufio and chunking layers — cost as much CPU as the daemon's
// own work (BenchmarkServers: same client, same handler). This server
// keeps one goroutine per connection, reuses the response and its header
// map, enforces every timeout from one reaper goroutine that looks at each
// connection every 50 ms, and starts a disconnect watch only for a request
// that has run for that long (a long-poll).
//
// What it does not do: TLS, HTTP/2, Upgrade/Hijack, informational (1xx)
// answers other than "100 Continue", and trailers (read and dropped).
// The daemon serves TLS with net/http.
package h1
