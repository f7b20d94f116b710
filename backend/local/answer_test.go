package local

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/internal/answer"
)

// answerConn is a connection of answers sent early (package answer): at
// each write it records what a reader opening the database then sees.
type answerConn struct {
	path   string
	writes int
	seen   []string // the lease IDs a new reader loaded at the write
	err    error
}

func (c *answerConn) Frame(dst []byte, status int, contentType string, body []byte) []byte {
	return append(dst, body...)
}

func (c *answerConn) TryWrite(b []byte) (int, error) {
	c.writes++
	r, err := Open(context.Background(), c.path, Options{Stack: "s"})
	if err != nil {
		c.err = err
		return len(b), nil
	}
	defer r.Close()
	recs, err := r.PoolStore().LoadLeases(context.Background())
	if err != nil {
		c.err = err
	}
	for _, rec := range recs {
		c.seen = append(c.seen, rec.LeaseID)
	}
	return len(b), nil
}

// armed returns a request context whose answer is armed, and its offer.
func armed(c *answerConn) (context.Context, *answer.Offer) {
	o := answer.NewOffer(c)
	o.Reset(true)
	ctx := answer.NewContext(context.Background(), o)
	answer.Arm(ctx, 200, "application/json", []byte(`{"lease_id":"g"}`))
	return ctx, o
}

// A grant's answer is sent by the writer, before CreateLease returns, once
// a new reader of the files finds the grant.
func TestJournalSendsTheGrantsAnswerOnceItIsDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	_, ps, _, _ := lazyLeader(t, path, nil)
	c := &answerConn{path: path}
	ctx, o := armed(c)
	if err := ps.CreateLease(ctx, rec("g")); err != nil {
		t.Fatal(err)
	}
	if c.writes != 1 || c.err != nil || !slices.Contains(c.seen, "g") {
		t.Fatalf("%d writes (%v); a reader at the write saw %v, want g", c.writes, c.err, c.seen)
	}
	if sent, rest, err := o.Settle(); !sent || len(rest) != 0 || err != nil {
		t.Fatalf("Settle = %v, %q, %v", sent, rest, err)
	}
}

// A lease's put (a heartbeat's new expiry) carries its answer as a create
// does; a grant's put and a delete carry none, and the server answers.
func TestJournalSendsAnswersOfLeasesOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	_, ps, gs, _ := lazyLeader(t, path, nil)
	c := &answerConn{path: path}
	ctx, o := armed(c)
	if err := gs.PutGrant(ctx, "permit/1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := ps.DeleteLease(ctx, "none"); err != nil {
		t.Fatal(err)
	}
	if sent, _, _ := o.Settle(); sent || c.writes != 0 {
		t.Fatalf("sent=%v after %d writes; want the answer left to the server", sent, c.writes)
	}
	ctx, o = armed(c)
	if err := ps.PutLease(ctx, rec("hb")); err != nil {
		t.Fatal(err)
	}
	if sent, _, _ := o.Settle(); !sent || c.writes != 1 || !slices.Contains(c.seen, "hb") {
		t.Fatalf("a heartbeat's put: sent=%v after %d writes, a reader saw %v", sent, c.writes, c.seen)
	}
}

// A grant that fails is never answered early: fenced by a takeover, or
// given up by its caller before the writer took it.
func TestJournalSendsNoAnswerForAFailedGrant(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	now := time.Unix(1000, 0)
	_, stale, _, epoch := lazyLeader(t, path, func() time.Time { return now })

	c := &answerConn{path: path}
	ctx, o := armed(c)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := stale.CreateLease(ended, rec("late")); !errors.Is(err, context.Canceled) {
		t.Fatalf("CreateLease with an ended context: %v", err)
	}
	if sent, _, _ := o.Settle(); sent || c.writes != 0 {
		t.Fatalf("a grant not written was answered (sent=%v, %d writes)", sent, c.writes)
	}

	nb, err := Open(context.Background(), path, Options{Stack: "s", Clock: func() time.Time { return now.Add(2 * time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nb.Close() })
	if l, held, err := nb.AcquireLeader(context.Background(), backend.LeaderClaim{Holder: "b", Lease: time.Minute}); err != nil || !held || l.Epoch != epoch+1 {
		t.Fatalf("takeover: %+v, %v, %v", l, held, err)
	}
	ctx, o = armed(c)
	if err := stale.CreateLease(ctx, rec("fenced")); !errors.Is(err, backend.ErrFenced) {
		t.Fatalf("a stale leader's CreateLease: %v; want ErrFenced", err)
	}
	if sent, _, _ := o.Settle(); sent || c.writes != 0 {
		t.Fatalf("a fenced grant was answered (sent=%v, %d writes)", sent, c.writes)
	}
}
