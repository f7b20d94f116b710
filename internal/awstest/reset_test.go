package awstest_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/internal/awstest"
)

// A client killed in the middle of a request (kill -9 of a process under
// test) resets its connections. Neither emulator may die of it: dynalite
// rethrows a request's "aborted"/ECONNRESET error, which kills node, and
// every later test of the binary then fails with "connection refused".
func TestEmulatorsOutliveAResetConnection(t *testing.T) {
	e := awstest.Start(t)
	for _, base := range []string{e.DynamoDB, e.SQS} {
		for range 3 {
			c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			// Headers promise a body that never comes in full.
			if _, err := c.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 100\r\n\r\n{\"Lim")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // the server has begun reading the body
			_ = c.(*net.TCPConn).SetLinger(0) // close sends RST
			_ = c.Close()
		}
		time.Sleep(200 * time.Millisecond) // a crash would have happened by now
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(base)
		if err != nil {
			t.Fatalf("%s after reset connections: %v", base, err)
		}
		resp.Body.Close()
	}
}
