package aws

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/internal/groupcommit"
)

// Grant-record items (pool leases and other grants: puts and deletes) are
// written by group commit (package groupcommit): the writes queued while
// the writer is busy form one batch, cut into rounds of writes to distinct
// items, in arrival order. In a round:
//   - unfenced writes go out as BatchWriteItem requests of up to 25 (items
//     DynamoDB leaves unprocessed are resent with backoff; those still
//     unprocessed fail their callers);
//   - fenced writes (Fence) stay one conditional PutItem/DeleteItem each,
//     sent concurrently, because BatchWriteItem takes no conditions; the
//     leader read that proves them (see checkFence) is then shared: one
//     consistent GetItem for the round instead of one per write.
//
// TransactWriteItems would make a round one request with the leader check
// inside, but the emulators the tests run against (dynalite) lack it.
// Each caller waits for its own write's outcome.

// maxItemBatch bounds the writes the writer takes at once.
const maxItemBatch = 256

// batchWriteMax is DynamoDB's limit of requests in one BatchWriteItem.
const batchWriteMax = 25

// itemCommitTimeout bounds the requests of one round.
const itemCommitTimeout = 30 * time.Second

// itemWrite is one queued write of a grant-record item.
type itemWrite struct {
	what  string // "put pool lease x": for errors
	table string
	item  map[string]types.AttributeValue // the item to put; nil for a delete
	key   map[string]types.AttributeValue // stack and leaseId
	epoch int64                           // 0: unfenced
	// replaced is set by a fenced put that overwrote an item (a
	// heartbeat): such a put is never undone (see checkFence).
	replaced bool
}

type itemOp = groupcommit.Op[itemWrite]

// writeItem queues one write and waits for its outcome.
func (b *Backend) writeItem(ctx context.Context, w itemWrite) error {
	b.recordsOnce.Do(func() { b.records = groupcommit.New(maxItemBatch, b.commitItems) })
	err := b.records.Do(ctx, w)
	if errors.Is(err, groupcommit.ErrClosed) {
		err = errors.New("the backend is closed; open it again")
	}
	if err != nil {
		return fmt.Errorf("%s of stack %s: %w", w.what, b.stack, err)
	}
	return nil
}

// Close stops the writer of grant records after writing what is queued;
// later record writes fail. Other calls are unaffected.
func (b *Backend) Close() error {
	b.recordsOnce.Do(func() {}) // none started: none will be
	if b.records != nil {
		b.records.Close()
	}
	return nil
}

func itemKey(w *itemWrite) string {
	id, _ := w.key["leaseId"].(*types.AttributeValueMemberS)
	if id == nil {
		return w.table
	}
	return w.table + "\x00" + id.Value
}

// commitItems is the group commit of a batch (see above).
func (b *Backend) commitItems(batch []*itemOp) {
	ctx, cancel := context.WithTimeout(context.Background(), itemCommitTimeout)
	defer cancel()
	seen := map[string]bool{}
	for start := 0; start < len(batch); {
		end := start
		clear(seen)
		for end < len(batch) && !seen[itemKey(&batch[end].W)] {
			seen[itemKey(&batch[end].W)] = true
			end++
		}
		b.commitRound(ctx, batch[start:end])
		start = end
	}
}

// commitRound writes ops, each to a distinct item.
func (b *Backend) commitRound(ctx context.Context, ops []*itemOp) {
	var fenced, plain []*itemOp
	for _, op := range ops {
		if op.W.epoch != 0 {
			fenced = append(fenced, op)
		} else {
			plain = append(plain, op)
		}
	}
	var wg sync.WaitGroup
	for _, op := range fenced {
		wg.Go(func() { op.Err = b.conditionalWrite(ctx, &op.W) })
	}
	for len(plain) > 0 {
		chunk := plain[:min(len(plain), batchWriteMax)]
		plain = plain[len(chunk):]
		wg.Go(func() { b.batchWrite(ctx, chunk) })
	}
	wg.Wait()
	written := fenced[:0]
	for _, op := range fenced {
		if op.Err == nil {
			written = append(written, op)
		}
	}
	if len(written) > 0 {
		b.checkFence(ctx, written)
	}
}

// batchWrite writes ops (unfenced, distinct items, at most 25) with
// BatchWriteItem, resending what DynamoDB leaves unprocessed.
func (b *Backend) batchWrite(ctx context.Context, ops []*itemOp) {
	reqs := map[string][]types.WriteRequest{}
	for _, op := range ops {
		w := &op.W
		if w.item != nil {
			reqs[w.table] = append(reqs[w.table], types.WriteRequest{PutRequest: &types.PutRequest{Item: w.item}})
		} else {
			reqs[w.table] = append(reqs[w.table], types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: w.key}})
		}
	}
	const attempts = 8
	for attempt := 0; len(reqs) > 0; attempt++ {
		if attempt == attempts {
			for _, op := range ops {
				if unprocessed(reqs, &op.W) {
					op.Err = fmt.Errorf("dynamodb BatchWriteItem %s: still unprocessed after %d attempts (throttled: raise the table's capacity, or retry)", op.W.table, attempts)
				}
			}
			return
		}
		if attempt > 0 {
			select {
			case <-time.After(time.Duration(1<<attempt) * 10 * time.Millisecond):
			case <-ctx.Done():
			}
		}
		out, err := b.ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: reqs})
		if err != nil {
			for _, op := range ops {
				if unprocessed(reqs, &op.W) {
					op.Err = ddbError("BatchWriteItem", op.W.table, err)
				}
			}
			return
		}
		reqs = out.UnprocessedItems
	}
}

// unprocessed reports whether w's request is in reqs.
func unprocessed(reqs map[string][]types.WriteRequest, w *itemWrite) bool {
	id := w.key["leaseId"].(*types.AttributeValueMemberS).Value
	for _, r := range reqs[w.table] {
		var k map[string]types.AttributeValue
		if r.PutRequest != nil {
			k = r.PutRequest.Item
		} else if r.DeleteRequest != nil {
			k = r.DeleteRequest.Key
		}
		if v, ok := k["leaseId"].(*types.AttributeValueMemberS); ok && v.Value == id {
			return true
		}
	}
	return false
}

// fenceCondition makes a write to a grant item conditional on no newer
// leader having written it: items carry the epoch of their last writer.
const fenceCondition = "attribute_not_exists(fence) OR fence <= :fence"

// conditionalWrite is the first half of a fenced write: the put or delete,
// conditional on fenceCondition. A newer writer's item fails with
// backend.ErrFenced.
func (b *Backend) conditionalWrite(ctx context.Context, w *itemWrite) error {
	vals := map[string]types.AttributeValue{":fence": n(w.epoch)}
	var err error
	op := "PutItem"
	if w.item != nil {
		w.item["fence"] = n(w.epoch)
		var out *dynamodb.PutItemOutput
		out, err = b.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &w.table, Item: w.item,
			ConditionExpression: awssdk.String(fenceCondition), ExpressionAttributeValues: vals,
			ReturnValues: types.ReturnValueAllOld})
		w.replaced = err == nil && len(out.Attributes) > 0
	} else {
		op = "DeleteItem"
		_, err = b.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &w.table, Key: w.key,
			ConditionExpression: awssdk.String(fenceCondition), ExpressionAttributeValues: vals})
	}
	if isConditionFailed(err) {
		return fmt.Errorf("a leader with an epoch above %d wrote it: %w", w.epoch, backend.ErrFenced)
	}
	if err != nil {
		return ddbError(op, w.table, err)
	}
	return nil
}

// checkFence is the second half of the fenced writes of a round, all of
// which were written. DynamoDB cannot make a write to one item conditional
// on another without a transaction (which the emulators lack, and which
// costs twice the write), so the leader item is read, once, with a
// consistent read after the writes: if a write's epoch is still the
// stack's, that write happened before any takeover, and the next leader
// (which restores after taking the lease) sees it. If not, a put is undone
// (best effort: deleted unless the new leader rewrote it) and its caller
// gets backend.ErrFenced, so no client is ever told of a grant the next
// leader may not count.
//
// A put that replaced an item (a heartbeat's longer expiry) is not undone:
// the new leader may already have restored the item as written, and
// deleting it would drop a held grant from the records; the longer expiry
// it leaves can only keep a slot held longer, never hand it out twice.
func (b *Backend) checkFence(ctx context.Context, ops []*itemOp) {
	l, err := b.ReadLeader(ctx)
	for _, op := range ops {
		w := &op.W
		switch {
		case err != nil:
			op.Err = fmt.Errorf("verify the leader epoch: %w", err)
		case l.Epoch != w.epoch:
			errs := []error{fmt.Errorf("written under leader epoch %d, the stack's is %d: %w", w.epoch, l.Epoch, backend.ErrFenced)}
			if w.item != nil && !w.replaced {
				if uerr := b.undoPut(ctx, w); uerr != nil {
					errs = append(errs, fmt.Errorf("undo: %w", uerr))
				}
			}
			op.Err = errors.Join(errs...)
		}
	}
}

// undoPut deletes w's item unless a newer leader rewrote it since.
func (b *Backend) undoPut(ctx context.Context, w *itemWrite) error {
	_, err := b.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &w.table, Key: w.key,
		ConditionExpression:       awssdk.String("fence = :fence"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":fence": n(w.epoch)},
	})
	if isConditionFailed(err) {
		return nil // rewritten by the new leader: it is its record now
	}
	return err
}
