package aws

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rpdhq/rpd/backend"
)

// MaxStateBytes is the largest state document the state item can hold
// (DynamoDB's 400 KB item limit, less room for the other attributes).
const MaxStateBytes = 390 * 1024

func (b *Backend) stateKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": s("state#" + b.stack)}
}

func (b *Backend) lockKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": s("lock#" + b.stack)}
}

// ReadState returns the stack's document and version with a consistent
// read; (nil, 0, nil) when the item does not exist. An item whose document
// does not verify is an error naming the table and key.
func (b *Backend) ReadState(ctx context.Context) ([]byte, int64, error) {
	table := b.tableName(RoleState)
	out, err := b.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: b.stateKey(), ConsistentRead: awssdk.Bool(true)})
	if err != nil {
		return nil, 0, ddbError("GetItem", table, fmt.Errorf("state of stack %s: %w", b.stack, err))
	}
	if out.Item == nil {
		return nil, 0, nil
	}
	r := itemReader{item: out.Item}
	doc, version, sum := r.bytes("doc"), r.num("version"), r.str("sha256")
	got := sha256.Sum256(doc)
	if r.err != nil || version < 1 || hex.EncodeToString(got[:]) != sum || !json.Valid(doc) {
		return nil, 0, fmt.Errorf("read state of stack %s from dynamodb table %s item state#%s: the stored document (version %d) is corrupt (%v; checksum or JSON does not verify); restore it from a backup, or re-apply from the configuration",
			b.stack, table, b.stack, version, r.err)
	}
	return doc, version, nil
}

// WriteState stores doc if the current version is expectVersion, with a
// conditional PutItem.
func (b *Backend) WriteState(ctx context.Context, doc []byte, expectVersion int64) (int64, error) {
	if !json.Valid(doc) {
		return 0, fmt.Errorf("write state of stack %s: the document is not valid JSON", b.stack)
	}
	if len(doc) > MaxStateBytes {
		return 0, fmt.Errorf("write state of stack %s: the document is %d bytes, more than the %d a DynamoDB item holds", b.stack, len(doc), MaxStateBytes)
	}
	sum := sha256.Sum256(doc)
	item := b.stateKey()
	item["doc"] = &types.AttributeValueMemberB{Value: doc}
	item["version"] = n(expectVersion + 1)
	item["sha256"] = s(hex.EncodeToString(sum[:]))
	in := &dynamodb.PutItemInput{TableName: awssdk.String(b.tableName(RoleState)), Item: item}
	if expectVersion == 0 {
		in.ConditionExpression = awssdk.String("attribute_not_exists(pk)")
	} else {
		in.ConditionExpression = awssdk.String("version = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": n(expectVersion)}
	}
	_, err := b.ddb.PutItem(ctx, in)
	if isConditionFailed(err) {
		return 0, fmt.Errorf("write state of stack %s to %s at version %d: %w", b.stack, *in.TableName, expectVersion, backend.ErrVersionConflict)
	}
	if err != nil {
		return 0, ddbError("PutItem", *in.TableName, fmt.Errorf("state of stack %s: %w", b.stack, err))
	}
	return expectVersion + 1, nil
}

func newLockID() string {
	var x [16]byte
	_, _ = rand.Read(x[:])
	return hex.EncodeToString(x[:])
}

// Lock takes the stack's lock item with a PutItem conditioned on "no item,
// or its lease has expired". Expiry is judged by this process's clock, so
// hosts sharing a stack need roughly synchronised clocks (seconds).
func (b *Backend) Lock(ctx context.Context, info backend.LockInfo, ttl time.Duration) (backend.LockInfo, error) {
	if ttl <= 0 {
		return backend.LockInfo{}, fmt.Errorf("lock stack %s: the lease ttl %v must be positive", b.stack, ttl)
	}
	if info.ID == "" {
		info.ID = newLockID()
	}
	now := b.clock()
	if info.Created.IsZero() {
		info.Created = now
	}
	info.Created, info.Expires = info.Created.UTC(), now.Add(ttl).UTC()
	table := b.tableName(RoleState)
	item := b.lockKey()
	item["lockId"] = s(info.ID)
	item["created"] = n(unixNanos(info.Created))
	item["expires"] = n(unixNanos(info.Expires))
	for k, v := range map[string]string{"who": info.Who, "operation": info.Operation} {
		if v != "" {
			item[k] = s(v)
		}
	}
	// A holder seen as live may release or expire between our PutItem and
	// our GetItem; try again a few times before reporting it.
	for attempt := 0; attempt < 3; attempt++ {
		_, err := b.ddb.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 &table,
			Item:                      item,
			ConditionExpression:       awssdk.String("attribute_not_exists(pk) OR expires < :now"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": n(unixNanos(now))},
		})
		if err == nil {
			return info, nil
		}
		if !isConditionFailed(err) {
			return backend.LockInfo{}, ddbError("PutItem", table, fmt.Errorf("lock of stack %s: %w", b.stack, err))
		}
		holder, found, err := b.readLock(ctx)
		if err != nil {
			return backend.LockInfo{}, err
		}
		if found && holder.Expires.After(now) {
			return backend.LockInfo{}, fmt.Errorf("lock stack %s in %s: %w", b.stack, table, &backend.LockedError{Holder: holder})
		}
	}
	return backend.LockInfo{}, fmt.Errorf("lock stack %s in %s: the lock item kept changing under us; try again", b.stack, table)
}

func (b *Backend) readLock(ctx context.Context) (backend.LockInfo, bool, error) {
	table := b.tableName(RoleState)
	out, err := b.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: b.lockKey(), ConsistentRead: awssdk.Bool(true)})
	if err != nil {
		return backend.LockInfo{}, false, ddbError("GetItem", table, fmt.Errorf("lock of stack %s: %w", b.stack, err))
	}
	if out.Item == nil {
		return backend.LockInfo{}, false, nil
	}
	r := itemReader{item: out.Item}
	h := backend.LockInfo{ID: r.str("lockId"), Who: r.str("who"), Operation: r.str("operation"),
		Created: fromUnixNanos(r.num("created")), Expires: fromUnixNanos(r.num("expires"))}
	if r.err != nil {
		return h, true, fmt.Errorf("dynamodb GetItem %s: the lock item of stack %s is malformed: %w", table, b.stack, r.err)
	}
	return h, true, nil
}

// Renew extends the lease of the lock held under id.
func (b *Backend) Renew(ctx context.Context, id string, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("renew lock of stack %s: the lease ttl %v must be positive", b.stack, ttl)
	}
	table := b.tableName(RoleState)
	_, err := b.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &table,
		Key:                       b.lockKey(),
		UpdateExpression:          awssdk.String("SET expires = :e"),
		ConditionExpression:       awssdk.String("lockId = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": n(unixNanos(b.clock().Add(ttl))), ":id": s(id)},
	})
	return b.lockResult("renew", "UpdateItem", id, err)
}

// Unlock releases the lock held under id.
func (b *Backend) Unlock(ctx context.Context, id string) error {
	return b.lockResult("unlock", "DeleteItem", id, b.deleteLock(ctx, id))
}

// ForceUnlock removes the lock if its ID is id, whoever holds it.
func (b *Backend) ForceUnlock(ctx context.Context, id string) error {
	err := b.deleteLock(ctx, id)
	if err == nil {
		b.log.Warn("forced the state lock open", "stack", b.stack, "lock_id", id)
	}
	return b.lockResult("force-unlock", "DeleteItem", id, err)
}

func (b *Backend) deleteLock(ctx context.Context, id string) error {
	table := b.tableName(RoleState)
	_, err := b.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &table,
		Key:                       b.lockKey(),
		ConditionExpression:       awssdk.String("lockId = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": s(id)},
	})
	return err
}

func (b *Backend) lockResult(op, call, id string, err error) error {
	table := b.tableName(RoleState)
	if isConditionFailed(err) {
		return fmt.Errorf("%s lock %s of stack %s: %w", op, id, b.stack, backend.ErrLockNotHeld)
	}
	if err != nil {
		return ddbError(call, table, fmt.Errorf("%s lock %s of stack %s: %w", op, id, b.stack, err))
	}
	return nil
}
