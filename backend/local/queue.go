package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// Queue is the data plane of one queue, with SQS semantics: per-message
// delay, visibility timeout, a new receipt handle per delivery (older ones
// become stale), receive counts, retention, and roughly FIFO order (by send
// time, not guaranteed: a message made visible again keeps its place).
//
// A receipt handle is "<message id>.<random token>"; each delivery draws a
// new token, so Delete and ChangeVisibility match the current delivery only.
type Queue struct {
	b    *Backend
	name string
}

// Name is the queue's name.
func (q *Queue) Name() string { return q.name }

// Send enqueues body. A zero delay means the queue's default delay.
func (q *Queue) Send(ctx context.Context, body string, delay time.Duration) error {
	if err := backend.ValidateSend(body, delay); err != nil {
		return fmt.Errorf("queue %s: %w", q.name, err)
	}
	// One statement: the queue's default delay is read where the message
	// is inserted, and no row inserted means no such queue.
	now := q.b.now()
	res, err := q.b.st.send.exec(ctx,
		body, ms(now), ms(now), delay.Milliseconds(), delay.Milliseconds(), q.name)
	if err == nil {
		if n, _ := res.RowsAffected(); n == 0 {
			err = fmt.Errorf("queue %s: %w", q.name, backend.ErrQueueNotFound)
		}
	}
	if err != nil {
		return fmt.Errorf("send to queue %s in %s: %w", q.name, q.b.path, err)
	}
	return nil
}

// Receive returns up to max visible messages and hides them for visibility
// (zero means the queue's visibility timeout). When none is visible it polls
// the file every few milliseconds until one is or wait has passed; a message
// sent by another process is seen on the next poll.
//
// Selecting and hiding happen in one UPDATE … RETURNING inside a write
// transaction, so two receivers (goroutines or processes) never get the same
// message while it is invisible.
func (q *Queue) Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]pickup.Message, error) {
	if err := backend.ValidateReceive(max, visibility, wait); err != nil {
		return nil, fmt.Errorf("queue %s: %w", q.name, err)
	}
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	for polls := 0; ; polls++ {
		// While polling, look with a read first: an idle long poll should
		// not take the file's write lock every few milliseconds.
		if polls == 0 || q.anyVisible(ctx) {
			msgs, err := q.receiveOnce(ctx, max, visibility)
			if err != nil || len(msgs) > 0 || wait == 0 {
				return msgs, err
			}
		}
		poll := time.NewTimer(q.b.pollEvery)
		select {
		case <-ctx.Done():
			poll.Stop()
			return nil, fmt.Errorf("receive from queue %s: %w", q.name, ctx.Err())
		case <-deadline:
			poll.Stop()
			return nil, nil
		case <-poll.C:
		}
	}
}

// anyVisible reports whether the queue may have a visible message; on a
// read error it says yes, so that receiveOnce reports the error.
func (q *Queue) anyVisible(ctx context.Context) bool {
	var one int
	err := q.b.st.anyVisible.queryRow(ctx, q.name, ms(q.b.now())).Scan(&one)
	return !errors.Is(err, sql.ErrNoRows)
}

func (q *Queue) receiveOnce(ctx context.Context, max int, visibility time.Duration) ([]pickup.Message, error) {
	var msgs []pickup.Message
	err := q.b.write(ctx, func(tx *sql.Tx) error {
		var visMs, retMs int64
		err := q.b.st.queueTimeouts.tx(ctx, tx).queryRow(ctx, q.name).Scan(&visMs, &retMs)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("queue %s: %w", q.name, backend.ErrQueueNotFound)
		}
		if err != nil {
			return err
		}
		if visibility == 0 {
			visibility = time.Duration(visMs) * time.Millisecond
		}
		now := q.b.now()
		// Retention: a message older than the queue's retention is gone,
		// whether or not it was ever received.
		if _, err := q.b.st.expire.tx(ctx, tx).exec(ctx, q.name, ms(now)-retMs); err != nil {
			return err
		}
		rows, err := q.b.st.receive.tx(ctx, tx).query(ctx,
			ms(now.Add(visibility)), q.name, ms(now), max)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m pickup.Message
			var id int64
			var receipt string
			if err := rows.Scan(&id, &m.Body, &receipt, &m.ReceiveCount); err != nil {
				return err
			}
			m.ID = strconv.FormatInt(id, 10)
			m.ReceiptHandle = m.ID + "." + receipt
			msgs = append(msgs, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("receive from queue %s in %s: %w", q.name, q.b.path, err)
	}
	return msgs, nil
}

// parseHandle splits a receipt handle into message id and token.
func parseHandle(h string) (int64, string, error) {
	idStr, token, ok := strings.Cut(h, ".")
	id, err := strconv.ParseInt(idStr, 10, 64)
	if !ok || err != nil || token == "" {
		return 0, "", fmt.Errorf("malformed receipt handle %q: %w", h, pickup.ErrStaleHandle)
	}
	return id, token, nil
}

// Delete removes the message delivered under receiptHandle.
func (q *Queue) Delete(ctx context.Context, receiptHandle string) error {
	err := q.b.write(ctx, func(tx *sql.Tx) error { return q.deleteOne(ctx, tx, receiptHandle) })
	if err != nil {
		return fmt.Errorf("delete from queue %s: %w", q.name, err)
	}
	return nil
}

func (q *Queue) deleteOne(ctx context.Context, tx *sql.Tx, h string) error {
	id, token, err := parseHandle(h)
	if err != nil {
		return err
	}
	res, err := q.b.st.deleteMessage.tx(ctx, tx).exec(ctx, id, q.name, token)
	if err != nil {
		return err
	}
	return q.staleUnlessOne(ctx, tx, res)
}

// staleUnlessOne turns "no row matched the handle" into ErrStaleHandle, or
// ErrQueueNotFound when the queue itself is gone.
func (q *Queue) staleUnlessOne(ctx context.Context, tx *sql.Tx, res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil || n == 1 {
		return err
	}
	if _, err := loadQueue(q.b.st.loadQueueW.tx(ctx, tx).queryRow(ctx, q.name), q.b.path, q.name); err != nil {
		return err
	}
	return pickup.ErrStaleHandle
}

// ChangeVisibility makes the message delivered under receiptHandle visible
// again after timeout (0 = at once).
func (q *Queue) ChangeVisibility(ctx context.Context, receiptHandle string, timeout time.Duration) error {
	if err := backend.ValidateVisibility(timeout); err != nil {
		return fmt.Errorf("queue %s: %w", q.name, err)
	}
	err := q.b.write(ctx, func(tx *sql.Tx) error { return q.changeOne(ctx, tx, receiptHandle, timeout) })
	if err != nil {
		return fmt.Errorf("change visibility in queue %s: %w", q.name, err)
	}
	return nil
}

func (q *Queue) changeOne(ctx context.Context, tx *sql.Tx, h string, timeout time.Duration) error {
	id, token, err := parseHandle(h)
	if err != nil {
		return err
	}
	res, err := q.b.st.changeVis.tx(ctx, tx).exec(ctx,
		ms(q.b.now().Add(timeout)), id, q.name, token)
	if err != nil {
		return err
	}
	return q.staleUnlessOne(ctx, tx, res)
}

// DeleteBatch deletes up to 10 messages in one transaction; entries fail
// independently (a *pickup.BatchError names the failed handles).
func (q *Queue) DeleteBatch(ctx context.Context, receiptHandles []string) error {
	return q.batch(ctx, "delete batch", receiptHandles, func(tx *sql.Tx, h string) error { return q.deleteOne(ctx, tx, h) })
}

// ChangeVisibilityBatch changes the visibility of up to 10 messages in one
// transaction; entries fail independently.
func (q *Queue) ChangeVisibilityBatch(ctx context.Context, receiptHandles []string, timeout time.Duration) error {
	if err := backend.ValidateVisibility(timeout); err != nil {
		return fmt.Errorf("queue %s: %w", q.name, err)
	}
	return q.batch(ctx, "change visibility batch", receiptHandles, func(tx *sql.Tx, h string) error { return q.changeOne(ctx, tx, h, timeout) })
}

func (q *Queue) batch(ctx context.Context, op string, handles []string, fn func(*sql.Tx, string) error) error {
	if err := backend.ValidateBatch(handles); err != nil {
		return fmt.Errorf("%s in queue %s: %w", op, q.name, err)
	}
	failed := map[string]error{}
	err := q.b.write(ctx, func(tx *sql.Tx) error {
		clear(failed)
		for _, h := range handles {
			if err := fn(tx, h); err != nil {
				// A handle's own problem fails that entry; anything else
				// (the queue is gone, the file is busy) fails the call.
				if !errors.Is(err, pickup.ErrStaleHandle) {
					return err
				}
				failed[h] = err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s in queue %s in %s: %w", op, q.name, q.b.path, err)
	}
	if len(failed) > 0 {
		return &pickup.BatchError{Failed: failed}
	}
	return nil
}
