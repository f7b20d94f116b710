package aws

import (
	"context"
	"fmt"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rpdhq/rpd/runtime/pools"
)

// PoolStore persists the stack's pool leases in <prefix>-leases.
type PoolStore struct {
	b     *Backend
	epoch int64 // 0: unfenced
}

// Fence returns the store whose writes succeed only while epoch is the
// stack's leader epoch (backend.Leader); a stale epoch fails with
// backend.ErrFenced (see Backend.checkFence for how, without transactions).
// Writes of concurrent callers are group-committed (commit.go).
func (p *PoolStore) Fence(epoch int64) *PoolStore { return &PoolStore{b: p.b, epoch: epoch} }

// PutLease creates or replaces a record.
func (p *PoolStore) PutLease(ctx context.Context, rec pools.LeaseRecord) error {
	if rec.LeaseID == "" {
		return fmt.Errorf("put pool lease: empty LeaseID (pool %s, task %s)", rec.Pool, rec.TaskID)
	}
	table := p.b.tableName(RoleLeases)
	item := map[string]types.AttributeValue{
		"stack":     s(p.b.stack),
		"leaseId":   s(rec.LeaseID),
		"priority":  n(int64(rec.Priority)),
		"slots":     n(int64(rec.Slots)),
		"grantedAt": n(unixNanos(rec.GrantedAt)),
		"expiresAt": n(unixNanos(rec.ExpiresAt)),
		"ttlNanos":  n(int64(rec.TTL)),
	}
	for k, v := range map[string]string{"pool": rec.Pool, "taskId": rec.TaskID, "owner": rec.Owner} {
		if v != "" {
			item[k] = s(v)
		}
	}
	key := map[string]types.AttributeValue{"stack": item["stack"], "leaseId": item["leaseId"]}
	return p.b.writeItem(ctx, itemWrite{what: "put pool lease " + rec.LeaseID, table: table, item: item, key: key, epoch: p.epoch})
}

// DeleteLease removes a record; a missing one is not an error.
func (p *PoolStore) DeleteLease(ctx context.Context, leaseID string) error {
	table := p.b.tableName(RoleLeases)
	key := map[string]types.AttributeValue{"stack": s(p.b.stack), "leaseId": s(leaseID)}
	return p.b.writeItem(ctx, itemWrite{what: "delete pool lease " + leaseID, table: table, key: key, epoch: p.epoch})
}

// LoadLeases returns every record of the stack (consistent Query), by lease ID.
func (p *PoolStore) LoadLeases(ctx context.Context) ([]pools.LeaseRecord, error) {
	table := p.b.tableName(RoleLeases)
	pg := dynamodb.NewQueryPaginator(p.b.ddb, &dynamodb.QueryInput{
		TableName:                 &table,
		KeyConditionExpression:    awssdk.String("#stack = :stack"),
		ExpressionAttributeNames:  map[string]string{"#stack": "stack"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":stack": s(p.b.stack)},
		ConsistentRead:            awssdk.Bool(true),
	})
	var out []pools.LeaseRecord
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, ddbError("Query", table, fmt.Errorf("pool leases of stack %s: %w", p.b.stack, err))
		}
		for _, item := range page.Items {
			if k, ok := item["leaseId"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(k.Value, grantPrefix) {
				continue // a GrantStore record
			}
			r := itemReader{item: item}
			rec := pools.LeaseRecord{
				LeaseID: r.str("leaseId"), Pool: r.str("pool"), TaskID: r.str("taskId"),
				Priority: int(r.num("priority")), Slots: int(r.num("slots")),
				GrantedAt: fromUnixNanos(r.num("grantedAt")), ExpiresAt: fromUnixNanos(r.num("expiresAt")),
				TTL:   time.Duration(r.num("ttlNanos")), // absent in older items: 0
				Owner: r.str("owner"),                   // absent in older items: ""
			}
			if r.err != nil {
				return nil, fmt.Errorf("dynamodb Query %s: pool lease %q of stack %s is malformed: %w", table, rec.LeaseID, p.b.stack, r.err)
			}
			out = append(out, rec)
		}
	}
	return out, nil
}
