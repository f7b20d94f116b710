package answer_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/rpdhq/rpd/internal/answer"
)

// printConn frames an answer as a status line and body, and prints what
// it is asked to write.
type printConn struct{}

func (printConn) Frame(dst []byte, status int, contentType string, body []byte) []byte {
	dst = append(dst, "HTTP/1.1 "+strconv.Itoa(status)+" ("+contentType+") "...)
	return append(dst, body...)
}

func (printConn) TryWrite(b []byte) (int, error) {
	fmt.Printf("written by the writer: %s\n", b)
	return len(b), nil
}

// The three parties of an answer sent early: the server offers it, the
// handler's code arms it before its write, and the store's writer sends
// it once the write is durable; the server then settles the request.
func Example() {
	// The server, for each request of a connection.
	offer := answer.NewOffer(printConn{})
	offer.Reset(true)
	ctx := answer.NewContext(context.Background(), offer)

	// The code that knows the answer, just before the write.
	answer.Arm(ctx, 200, "application/json", []byte(`{"lease_id":"db.1"}`))

	// The store: the write carries the answer, and its writer sends it
	// once the record is durable (on the writer's goroutine).
	early := answer.Take(ctx)
	early.Send()

	// The server, after the handler returned.
	sent, rest, err := offer.Settle()
	fmt.Println("sent early:", sent, "left to write:", len(rest), "error:", err)
	// Output:
	// written by the writer: HTTP/1.1 200 (application/json) {"lease_id":"db.1"}
	// sent early: true left to write: 0 error: <nil>
}
