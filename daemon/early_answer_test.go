package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
	"github.com/rpdhq/rpd/internal/waitfor"
)

// rawAcquire sends an acquire on a new plain connection and returns the
// answer's head (lines, Date dropped) and its lease; then it checks the
// connection still serves (a release on it answers 204).
func rawAcquire(t *testing.T, td *testDaemon, taskID string) ([]string, api.Lease) {
	t.Helper()
	c, err := net.Dial("tcp", td.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	body := fmt.Sprintf(`{"task_id":%q}`, taskID)
	fmt.Fprintf(c, "POST /v1/pools/db/acquire HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(c)
	var head []string
	var lengthLine string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the answer's head: %v (so far %q)", err, head)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if strings.HasPrefix(line, "Content-Length: ") {
			lengthLine = line
		}
		// The Date, and the length of a body that holds times, vary.
		if !strings.HasPrefix(line, "Date: ") && !strings.HasPrefix(line, "Content-Length: ") {
			head = append(head, line)
		}
	}
	n := -1
	if v, ok := strings.CutPrefix(lengthLine, "Content-Length: "); ok {
		n, _ = strconv.Atoi(v)
	}
	b := make([]byte, max(n, 0))
	if _, err := io.ReadFull(br, b); err != nil || n < 1 || b[n-1] != '\n' {
		t.Fatalf("body of %d bytes: %q, %v (WriteJSON ends it with a newline)", n, b, err)
	}
	var l api.Lease
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "DELETE /v1/leases/%s HTTP/1.1\r\nHost: x\r\n\r\n", l.LeaseID)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("release on the same connection: %v, %v", resp, err)
	}
	return head, l
}

// A grant's answer is sent by the grant journal's writer, and it is the
// answer the request's goroutine writes with LateAnswers (the same
// header lines, the same lease), on a connection that goes on serving.
func TestGrantAnswersSentEarlyAreTheLateOnes(t *testing.T) {
	const body = "pool \"db\" {\n  slots = 2\n}\n"
	early := startDaemon(t, body)
	late := startDaemon(t, body, func(o *Options) { o.LateAnswers = true })
	eh, el := rawAcquire(t, early, "job-1")
	lh, ll := rawAcquire(t, late, "job-1")
	if got := early.d.plain.Load().EarlyAnswers(); got != 1 {
		t.Fatalf("early answers %d, want 1", got)
	}
	if got := late.d.plain.Load().EarlyAnswers(); got != 0 {
		t.Fatalf("early answers with LateAnswers: %d", got)
	}
	// The late head's lines come in the map's order.
	slices.Sort(eh[1:])
	slices.Sort(lh[1:])
	if strings.Join(eh, "\n") != strings.Join(lh, "\n") {
		t.Fatalf("head sent early:\n%s\nwritten late:\n%s", strings.Join(eh, "\n"), strings.Join(lh, "\n"))
	}
	el.LeaseID, ll.LeaseID, el.ExpiresAt = "", "", ll.ExpiresAt
	if el != ll {
		t.Fatalf("lease sent early %+v, written late %+v", el, ll)
	}
	// Through the Go client too: the grant is counted, its heartbeat is
	// answered early with the new expiry, and it is released.
	ctx := context.Background()
	l, err := early.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "job-2", TTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := early.c.Pool(ctx, "db"); err != nil || st.Used != 1 {
		t.Fatalf("pool after the grant answered early: %+v, %v", st, err)
	}
	time.Sleep(20 * time.Millisecond)
	hb, err := early.c.Heartbeat(ctx, l.LeaseID)
	if err != nil || hb.LeaseID != l.LeaseID || !hb.ExpiresAt.After(l.ExpiresAt) {
		t.Fatalf("heartbeat: %+v, %v (the grant's expiry %v)", hb, err, l.ExpiresAt)
	}
	if err := early.c.Release(ctx, l.LeaseID); err != nil {
		t.Fatal(err)
	}
	// Counted once each handler returned, which may follow its answer.
	waitfor.Within(t, 5*time.Second, "3 answers sent early (two grants, one heartbeat)", func() bool {
		return early.d.plain.Load().EarlyAnswers() == 3
	})
}

// A lease answered early is already held: another connection heartbeats
// and releases it at once, while the acquire's handler may still be
// finishing.
func TestLeaseAnsweredEarlyIsHeldOnEveryConnection(t *testing.T) {
	td := startDaemon(t, "pool \"db\" {\n  slots = 4\n}\n")
	ctx := context.Background()
	done := make(chan error, 4)
	for w := range 4 {
		go func() {
			other, err := client.New(td.addr, client.WithRetry(0))
			if err != nil {
				done <- err
				return
			}
			for i := range 100 {
				l, err := td.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: fmt.Sprintf("w%d-%d", w, i), TTLSeconds: 60, WaitSeconds: 5})
				if err != nil {
					done <- err
					return
				}
				if _, err := other.Heartbeat(ctx, l.LeaseID); err != nil {
					done <- fmt.Errorf("heartbeat of %s on another connection: %w", l.LeaseID, err)
					return
				}
				if err := other.Release(ctx, l.LeaseID); err != nil {
					done <- fmt.Errorf("release of %s on another connection: %w", l.LeaseID, err)
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// Counted once each handler returned, which may follow its answer.
	waitfor.Within(t, 5*time.Second, "the 400 grants' and 400 heartbeats' answers counted as sent early", func() bool {
		return td.d.plain.Load().EarlyAnswers() >= 800
	})
}
