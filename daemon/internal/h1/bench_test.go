package h1

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkServers is the reason for the package: the daemon's hot pair (a
// POST with a small JSON body answered with a small JSON document, then a
// DELETE answered 204) against this server and net/http's, same handler,
// same lean keep-alive client, 16 concurrent clients on 127.0.0.1. The
// pair's CPU is what the server adds to the daemon's own work.
func BenchmarkServers(b *testing.B) {
	lease := []byte(`{"lease_id":"load/0123456789abcdef","pool":"load","slots":1,"task_id":"bench","granted_at":"2026-11-27T05:00:00Z","expires_at":"2026-11-27T05:05:00Z"}` + "\n")
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(lease)
	})
	for _, bc := range []struct {
		name  string
		serve func(net.Listener) (stop func())
	}{
		{"net-http", func(ln net.Listener) func() {
			s := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
			go s.Serve(ln)
			return func() { s.Close() }
		}},
		{"h1", func(ln net.Listener) func() {
			s := &Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
			go s.Serve(ln)
			return func() { s.Close() }
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer bc.serve(ln)()
			addr := ln.Addr().String()
			b.SetParallelism(8)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Error(err)
					return
				}
				defer c.Close()
				br := bufio.NewReader(c)
				body := `{"task_id":"bench","wait_seconds":5}`
				acquire := "POST /v1/pools/load/acquire HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
				release := "DELETE /v1/leases/load%2F0123456789abcdef HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"
				for pb.Next() {
					for _, req := range []string{acquire, release} {
						if _, err := io.WriteString(c, req); err != nil {
							b.Error(err)
							return
						}
						if err := readAnswer(br); err != nil {
							b.Error(err)
							return
						}
					}
				}
			})
		})
	}
}

// readAnswer reads one answer with a Content-Length body or none.
func readAnswer(br *bufio.Reader) error {
	n := 0
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if first && !strings.HasPrefix(string(line), "HTTP/1.1 2") {
			return errors.New("answer " + string(line))
		}
		if len(line) <= 2 {
			break
		}
		if k, v, ok := strings.Cut(string(line), ":"); ok && strings.EqualFold(k, "Content-Length") {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	_, err := br.Discard(n)
	return err
}
