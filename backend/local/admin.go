package local

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/rpdhq/rpd/backend"
)

// queueRow is a queue's stored configuration.
type queueRow struct {
	visibility, retention, delay time.Duration
	tags                         map[string]string
}

func (b *Backend) queueURL(name string) string {
	return "sqlite://" + b.path + "#" + name
}

// loadQueue scans a queue's configuration from row, the result of
// sqlLoadQueue (on the read pool, or in a write transaction).
func loadQueue(row *sql.Row, path, name string) (queueRow, error) {
	var r queueRow
	var vis, ret, del int64
	var tags string
	err := row.Scan(&vis, &ret, &del, &tags)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("queue %s: %w", name, backend.ErrQueueNotFound)
	}
	if err != nil {
		return r, err
	}
	return queueFromColumns(path, name, vis, ret, del, tags)
}

// queueFromColumns converts a queues row's columns.
func queueFromColumns(path, name string, vis, ret, del int64, tags string) (queueRow, error) {
	var r queueRow
	r.visibility, r.retention, r.delay = time.Duration(vis)*time.Millisecond, time.Duration(ret)*time.Millisecond, time.Duration(del)*time.Millisecond
	if err := json.Unmarshal([]byte(tags), &r.tags); err != nil {
		return r, fmt.Errorf("queue %s in %s has unreadable tags (%q): %w", name, path, tags, err)
	}
	return r, nil
}

// CreateQueue creates a queue. Creating one that already exists with the
// same visibility, retention and delay succeeds (its tags are merged); with
// different ones it is an error, as in SQS: use UpdateQueue.
func (b *Backend) CreateQueue(ctx context.Context, name string, attrs backend.QueueAttributes) error {
	if err := backend.ValidateQueueName(name); err != nil {
		return fmt.Errorf("create queue: %w", err)
	}
	attrs, err := backend.NormalizeQueueAttributes(attrs)
	if err != nil {
		return fmt.Errorf("create queue %s: %w", name, err)
	}
	err = b.write(ctx, func(tx *sql.Tx) error {
		cur, err := loadQueue(b.st.loadQueueW.tx(ctx, tx).queryRow(ctx, name), b.path, name)
		switch {
		case errors.Is(err, backend.ErrQueueNotFound):
			tags, _ := json.Marshal(attrs.Tags)
			_, err := tx.ExecContext(ctx, `INSERT INTO queues (name, visibility_ms, retention_ms, delay_ms, tags, created_ms) VALUES (?, ?, ?, ?, ?, ?)`,
				name, attrs.VisibilityTimeout.Milliseconds(), attrs.Retention.Milliseconds(), attrs.Delay.Milliseconds(), string(tags), ms(b.now()))
			return err
		case err != nil:
			return err
		}
		if cur.visibility != attrs.VisibilityTimeout || cur.retention != attrs.Retention || cur.delay != attrs.Delay {
			return fmt.Errorf("queue %s already exists with different attributes (visibility %v, retention %v, delay %v); use UpdateQueue to change them",
				name, cur.visibility, cur.retention, cur.delay)
		}
		return b.mergeTags(ctx, tx, name, cur.tags, attrs.Tags)
	})
	if err != nil {
		return fmt.Errorf("create queue %s in %s: %w", name, b.path, err)
	}
	return nil
}

func (b *Backend) mergeTags(ctx context.Context, tx *sql.Tx, name string, cur, add map[string]string) error {
	merged := maps.Clone(cur)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, add)
	tags, _ := json.Marshal(merged)
	_, err := tx.ExecContext(ctx, `UPDATE queues SET tags = ? WHERE name = ?`, string(tags), name)
	return err
}

// UpdateQueue sets visibility, retention and delay and merges tags.
func (b *Backend) UpdateQueue(ctx context.Context, name string, attrs backend.QueueAttributes) error {
	attrs, err := backend.NormalizeQueueAttributes(attrs)
	if err != nil {
		return fmt.Errorf("update queue %s: %w", name, err)
	}
	err = b.write(ctx, func(tx *sql.Tx) error {
		cur, err := loadQueue(b.st.loadQueueW.tx(ctx, tx).queryRow(ctx, name), b.path, name)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE queues SET visibility_ms = ?, retention_ms = ?, delay_ms = ? WHERE name = ?`,
			attrs.VisibilityTimeout.Milliseconds(), attrs.Retention.Milliseconds(), attrs.Delay.Milliseconds(), name); err != nil {
			return err
		}
		return b.mergeTags(ctx, tx, name, cur.tags, attrs.Tags)
	})
	if err != nil {
		return fmt.Errorf("update queue %s in %s: %w", name, b.path, err)
	}
	return nil
}

// DeleteQueue deletes a queue and its messages.
func (b *Backend) DeleteQueue(ctx context.Context, name string) error {
	err := b.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE queue = ?`, name); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM queues WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("queue %s: %w", name, backend.ErrQueueNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete queue %s in %s: %w", name, b.path, err)
	}
	return nil
}

// DescribeQueue returns a queue's attributes, tags and approximate counts.
// Tags are reported as stored, so a queue without the stack's StackTag can
// be told apart as not managed by this stack.
func (b *Backend) DescribeQueue(ctx context.Context, name string) (backend.QueueInfo, error) {
	info := backend.QueueInfo{Name: name, URL: b.queueURL(name)}
	// One statement reads the configuration and counts the messages, in one
	// snapshot.
	var vis, ret, del int64
	var tags string
	err := b.st.describeQueue.queryRow(ctx, ms(b.now()), name).
		Scan(&vis, &ret, &del, &tags, &info.Visible, &info.InFlight, &info.Delayed)
	if errors.Is(err, sql.ErrNoRows) {
		err = fmt.Errorf("queue %s: %w", name, backend.ErrQueueNotFound)
	}
	if err != nil {
		return info, fmt.Errorf("describe queue %s in %s: %w", name, b.path, err)
	}
	r, err := queueFromColumns(b.path, name, vis, ret, del, tags)
	if err != nil {
		return info, fmt.Errorf("describe queue %s in %s: %w", name, b.path, err)
	}
	info.Attributes = backend.QueueAttributes{VisibilityTimeout: r.visibility, Retention: r.retention, Delay: r.delay, Tags: r.tags}
	return info, nil
}

// ListQueues returns the names of the queues starting with prefix, sorted.
func (b *Backend) ListQueues(ctx context.Context, prefix string) ([]string, error) {
	rows, err := b.rdb.QueryContext(ctx, `SELECT name FROM queues WHERE substr(name, 1, ?) = ? ORDER BY name`, len(prefix), prefix)
	if err != nil {
		return nil, fmt.Errorf("list queues %q* in %s: %w", prefix, b.path, err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("list queues in %s: %w", b.path, err)
		}
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list queues in %s: %w", b.path, err)
	}
	return names, nil
}
