package aws

import (
	"context"
	"fmt"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// grantPrefix starts the sort key of grant items in the leases table. Pool
// lease IDs start with their pool's name, which cannot contain ':'.
const grantPrefix = "grant:"

// GrantStore persists the daemon's remote grants other than pool leases
// (budget permits, VM-ceiling claims) as opaque records keyed by ID, in the
// leases table beside the pool leases, so a restarted daemon still counts
// what its clients hold.
type GrantStore struct {
	b     *Backend
	epoch int64 // 0: unfenced
}

// Fence returns the store whose writes succeed only while epoch is the
// stack's leader epoch, as PoolStore.Fence.
func (g *GrantStore) Fence(epoch int64) *GrantStore { return &GrantStore{b: g.b, epoch: epoch} }

// GrantStore returns the persistence of this stack's grants.
func (b *Backend) GrantStore() *GrantStore { return &GrantStore{b: b} }

// PutGrant creates or replaces the record id.
func (g *GrantStore) PutGrant(ctx context.Context, id string, body []byte) error {
	if id == "" {
		return fmt.Errorf("put grant of stack %s: empty ID", g.b.stack)
	}
	table := g.b.tableName(RoleLeases)
	item := map[string]types.AttributeValue{
		"stack":   s(g.b.stack),
		"leaseId": s(grantPrefix + id),
		"body":    &types.AttributeValueMemberB{Value: body},
	}
	key := map[string]types.AttributeValue{"stack": item["stack"], "leaseId": item["leaseId"]}
	return g.b.writeItem(ctx, itemWrite{what: "put grant " + id, table: table, item: item, key: key, epoch: g.epoch})
}

// DeleteGrant removes the record id; a missing one is not an error.
func (g *GrantStore) DeleteGrant(ctx context.Context, id string) error {
	table := g.b.tableName(RoleLeases)
	key := map[string]types.AttributeValue{"stack": s(g.b.stack), "leaseId": s(grantPrefix + id)}
	return g.b.writeItem(ctx, itemWrite{what: "delete grant " + id, table: table, key: key, epoch: g.epoch})
}

// LoadGrants returns every record of the stack by ID (consistent Query).
func (g *GrantStore) LoadGrants(ctx context.Context) (map[string][]byte, error) {
	table := g.b.tableName(RoleLeases)
	pg := dynamodb.NewQueryPaginator(g.b.ddb, &dynamodb.QueryInput{
		TableName:                 &table,
		KeyConditionExpression:    awssdk.String("#stack = :stack AND begins_with(leaseId, :prefix)"),
		ExpressionAttributeNames:  map[string]string{"#stack": "stack"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":stack": s(g.b.stack), ":prefix": s(grantPrefix)},
		ConsistentRead:            awssdk.Bool(true),
	})
	out := map[string][]byte{}
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, ddbError("Query", table, fmt.Errorf("grants of stack %s: %w", g.b.stack, err))
		}
		for _, item := range page.Items {
			key, _ := item["leaseId"].(*types.AttributeValueMemberS)
			body, ok := item["body"].(*types.AttributeValueMemberB)
			if key == nil || !ok {
				return nil, fmt.Errorf("dynamodb Query %s: a grant item of stack %s is malformed (no leaseId string or body binary)", table, g.b.stack)
			}
			out[strings.TrimPrefix(key.Value, grantPrefix)] = body.Value
		}
	}
	return out, nil
}
