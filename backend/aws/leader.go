package aws

import (
	"context"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rpdhq/rpd/backend"
)

var _ backend.LeaderStore = (*Backend)(nil)

// The leader record is the item "leader#<stack>" of <prefix>-state:
// {holder S (absent once released), epoch N, address, mode, configHash S,
// acquired, renewed, expires N}.
func (b *Backend) leaderKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": s("leader#" + b.stack)}
}

// ReadLeader returns the stack's leader record (consistent read), the zero
// Leader if none.
func (b *Backend) ReadLeader(ctx context.Context) (backend.Leader, error) {
	table := b.tableName(RoleState)
	out, err := b.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: b.leaderKey(), ConsistentRead: awssdk.Bool(true)})
	if err != nil {
		return backend.Leader{}, ddbError("GetItem", table, fmt.Errorf("leader lease of stack %s: %w", b.stack, err))
	}
	if out.Item == nil {
		return backend.Leader{}, nil
	}
	r := itemReader{item: out.Item}
	l := backend.Leader{Holder: r.str("holder"), Epoch: r.num("epoch"), Address: r.str("address"), Mode: r.str("mode"), ConfigHash: r.str("configHash"),
		AcquiredAt: fromUnixNanos(r.num("acquired")), RenewedAt: fromUnixNanos(r.num("renewed")), ExpiresAt: fromUnixNanos(r.num("expires"))}
	if r.err != nil {
		return backend.Leader{}, fmt.Errorf("dynamodb GetItem %s: the leader item of stack %s is malformed: %w", table, b.stack, r.err)
	}
	return l, nil
}

// AcquireLeader takes or renews the stack's leader lease (see
// backend.LeaderStore): a consistent read, then a PutItem conditional on
// the item being unchanged since (its epoch and expiry), so two daemons
// racing for an expired lease cannot both win.
func (b *Backend) AcquireLeader(ctx context.Context, c backend.LeaderClaim) (backend.Leader, bool, error) {
	if c.Holder == "" || c.Lease <= 0 {
		return backend.Leader{}, false, fmt.Errorf("acquire the leader lease of stack %s: holder %q and lease %v must be set and positive", b.stack, c.Holder, c.Lease)
	}
	cur, err := b.ReadLeader(ctx)
	if err != nil {
		return backend.Leader{}, false, err
	}
	next, ok := backend.NextLeader(cur, c, b.clock().UTC())
	if !ok {
		return cur, false, nil
	}
	item := b.leaderKey()
	item["epoch"] = n(next.Epoch)
	item["acquired"] = n(unixNanos(next.AcquiredAt))
	item["renewed"] = n(unixNanos(next.RenewedAt))
	item["expires"] = n(unixNanos(next.ExpiresAt))
	for k, v := range map[string]string{"holder": next.Holder, "address": next.Address, "mode": next.Mode, "configHash": next.ConfigHash} {
		if v != "" {
			item[k] = s(v)
		}
	}
	table := b.tableName(RoleState)
	in := &dynamodb.PutItemInput{TableName: &table, Item: item}
	if cur.Epoch == 0 && cur.Holder == "" && cur.ExpiresAt.IsZero() {
		in.ConditionExpression = awssdk.String("attribute_not_exists(pk)")
	} else {
		in.ConditionExpression = awssdk.String("epoch = :e AND expires = :x")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":e": n(cur.Epoch), ":x": n(unixNanos(cur.ExpiresAt))}
	}
	if _, err := b.ddb.PutItem(ctx, in); err != nil {
		if !isConditionFailed(err) {
			return backend.Leader{}, false, ddbError("PutItem", table, fmt.Errorf("leader lease of stack %s: %w", b.stack, err))
		}
		// Another daemon renewed or took it between our read and write.
		cur, err := b.ReadLeader(ctx)
		return cur, false, err
	}
	return next, true, nil
}

// ReleaseLeader gives the lease up when holder holds it under epoch.
func (b *Backend) ReleaseLeader(ctx context.Context, holder string, epoch int64) error {
	table := b.tableName(RoleState)
	_, err := b.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &table,
		Key:                       b.leaderKey(),
		UpdateExpression:          awssdk.String("REMOVE holder SET expires = :zero"),
		ConditionExpression:       awssdk.String("holder = :h AND epoch = :e"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": s(holder), ":e": n(epoch), ":zero": n(0)},
	})
	if err != nil && !isConditionFailed(err) {
		return ddbError("UpdateItem", table, fmt.Errorf("release the leader lease of stack %s: %w", b.stack, err))
	}
	return nil
}
