package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/rpdhq/rpd/backend"
)

// The DynamoDB layout. All tables are on-demand (PAY_PER_REQUEST).
//
//	<prefix>-instances  hash key instanceId (S). One item per instance, so
//	                    transitions spread over partitions. Global secondary
//	                    index byOwner (hash key owner, all attributes): a
//	                    retried pickup finds its owner's claim with one Query.
//	<prefix>-state      hash key pk (S). Per stack two items:
//	                    "state#<stack>" {doc B, version N, sha256 S} and
//	                    "lock#<stack>" {lockId, who, operation S, created, expires N}.
//	<prefix>-leases     hash key stack (S), range key leaseId (S): the
//	                    stack's pool leases, read back with one Query.
const (
	RoleInstances = "instances"
	RoleState     = "state"
	RoleLeases    = "leases"
)

// TableInfo is what TableStatus reports about one of the backend's tables.
type TableInfo struct {
	Role   string // RoleInstances, RoleState or RoleLeases
	Name   string
	Exists bool
	Status string // DynamoDB's TableStatus ("ACTIVE", "CREATING", …) when it exists
	// Problem is non-empty when the table exists with a key schema this
	// backend cannot use.
	Problem string
	// MissingIndex: the table exists without the global secondary index
	// this rpd uses (created by an older one); EnsureTables adds it.
	MissingIndex bool
}

func hasIndex(gsis []types.GlobalSecondaryIndexDescription, name string) bool {
	for _, g := range gsis {
		if awssdk.ToString(g.IndexName) == name {
			return true
		}
	}
	return false
}

// isMissingIndex reports whether err is DynamoDB's answer to a Query on an
// index the table does not have.
func isMissingIndex(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "ValidationException" &&
		strings.Contains(strings.ToLower(apiErr.ErrorMessage()), "index")
}

func ownerIndexSpec(attr string) types.GlobalSecondaryIndex {
	return types.GlobalSecondaryIndex{
		IndexName:  awssdk.String(ownerIndex),
		KeySchema:  []types.KeySchemaElement{{AttributeName: awssdk.String(attr), KeyType: types.KeyTypeHash}},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
	}
}

// indexAttribute defines the (string) attribute an index is keyed by.
func indexAttribute(attr string) types.AttributeDefinition {
	return types.AttributeDefinition{AttributeName: awssdk.String(attr), AttributeType: types.ScalarAttributeTypeS}
}

type tableSpec struct {
	role      string
	hash, rng string
	index     string // a global secondary index on attribute index ("" = none)
}

// ownerIndex is the instances table's index by owner.
const ownerIndex = "byOwner"

var tableSpecs = []tableSpec{
	{RoleInstances, "instanceId", "", "owner"},
	{RoleState, "pk", "", ""},
	{RoleLeases, "stack", "leaseId", ""},
}

func (b *Backend) tableName(role string) string { return b.prefix + "-" + role }

// TableStatus describes the backend's tables without changing anything, for
// reconcile to plan their creation.
func (b *Backend) TableStatus(ctx context.Context) ([]TableInfo, error) {
	out := make([]TableInfo, 0, len(tableSpecs))
	for _, ts := range tableSpecs {
		info := TableInfo{Role: ts.role, Name: b.tableName(ts.role)}
		d, err := b.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: awssdk.String(info.Name)})
		var nf *types.ResourceNotFoundException
		switch {
		case errors.As(err, &nf):
		case err != nil:
			return nil, fmt.Errorf("dynamodb DescribeTable %s: %w", info.Name, err)
		default:
			info.Exists = true
			info.Status = string(d.Table.TableStatus)
			info.Problem = keySchemaProblem(ts, d.Table.KeySchema)
			info.MissingIndex = ts.index != "" && !hasIndex(d.Table.GlobalSecondaryIndexes, ownerIndex)
		}
		out = append(out, info)
	}
	return out, nil
}

func keySchemaProblem(ts tableSpec, ks []types.KeySchemaElement) string {
	var hash, rng string
	for _, k := range ks {
		switch k.KeyType {
		case types.KeyTypeHash:
			hash = awssdk.ToString(k.AttributeName)
		case types.KeyTypeRange:
			rng = awssdk.ToString(k.AttributeName)
		}
	}
	if hash != ts.hash || rng != ts.rng {
		return fmt.Sprintf("key schema is hash %q range %q, rpd needs hash %q range %q; it is not an rpd table, choose another table prefix", hash, rng, ts.hash, ts.rng)
	}
	return ""
}

// EnsureTables creates the tables that do not exist and waits (up to two
// minutes) until all are ACTIVE. It is idempotent. A table that exists with
// another key schema is an error.
func (b *Backend) EnsureTables(ctx context.Context) error {
	infos, err := b.TableStatus(ctx)
	if err != nil {
		return err
	}
	for i, info := range infos {
		if info.Problem != "" {
			return fmt.Errorf("dynamodb table %s: %s", info.Name, info.Problem)
		}
		ts := tableSpecs[i]
		if info.Exists && info.MissingIndex {
			// An older rpd's table. Until the index exists (DynamoDB
			// back-fills it in the background) ClaimedBy falls back to a
			// Scan, so a failure here is a warning, not an error.
			idx := ownerIndexSpec(ts.index)
			_, err := b.ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{
				TableName:            awssdk.String(info.Name),
				AttributeDefinitions: []types.AttributeDefinition{indexAttribute(ts.index)},
				GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
					IndexName: idx.IndexName, KeySchema: idx.KeySchema, Projection: idx.Projection,
				}}},
			})
			if err != nil {
				b.log.Warn("could not add the owner index to the DynamoDB instances table; retried pickups find their claims with a Scan until it exists",
					"table", info.Name, "index", ownerIndex, "err", err)
			} else {
				b.log.Info("adding DynamoDB index", "table", info.Name, "index", ownerIndex)
			}
		}
		if info.Exists {
			continue
		}
		in := &dynamodb.CreateTableInput{
			TableName:   awssdk.String(info.Name),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: awssdk.String(ts.hash), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{{AttributeName: awssdk.String(ts.hash), KeyType: types.KeyTypeHash}},
		}
		if ts.rng != "" {
			in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: awssdk.String(ts.rng), AttributeType: types.ScalarAttributeTypeS})
			in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: awssdk.String(ts.rng), KeyType: types.KeyTypeRange})
		}
		if ts.index != "" {
			in.AttributeDefinitions = append(in.AttributeDefinitions, indexAttribute(ts.index))
			in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{ownerIndexSpec(ts.index)}
		}
		_, err := b.ddb.CreateTable(ctx, in)
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) { // another process created it first
			return fmt.Errorf("dynamodb CreateTable %s: %w", info.Name, err)
		}
		b.log.Info("created DynamoDB table", "table", info.Name, "role", ts.role)
	}
	w := dynamodb.NewTableExistsWaiter(b.ddb, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 200 * time.Millisecond
		o.MaxDelay = 2 * time.Second
	})
	for _, info := range infos {
		if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: awssdk.String(info.Name)}, 2*time.Minute); err != nil {
			return fmt.Errorf("dynamodb table %s did not become ACTIVE: %w", info.Name, err)
		}
	}
	return nil
}

// ddbError wraps err with the operation and table; a missing table wraps
// backend.ErrTableMissing.
func ddbError(op, table string, err error) error {
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return fmt.Errorf("dynamodb %s %s: %w (%v)", op, table, backend.ErrTableMissing, err)
	}
	return fmt.Errorf("dynamodb %s %s: %w", op, table, err)
}

// isConditionFailed reports whether err is a failed ConditionExpression.
func isConditionFailed(err error) bool {
	var cf *types.ConditionalCheckFailedException
	return errors.As(err, &cf)
}
