package backend

import (
	"context"
	"errors"
)

// TableAdmin manages the tables an aws stack keeps its instances, state and
// lock in.
type TableAdmin interface {
	// Tables reports each of the stack's tables and whether it exists.
	// It never creates anything.
	Tables(ctx context.Context) ([]TableInfo, error)
	// EnsureTables creates the missing tables and waits until they are
	// usable; it is idempotent.
	EnsureTables(ctx context.Context) error
}

// TableInfo is one of the stack's tables.
type TableInfo struct {
	Resource string // resource name: "instances" or "state"
	Name     string // the table's name in the backend
	Exists   bool
}

// ErrTableMissing: a DynamoDB table the aws backend needs does not exist.
// Planning never creates tables; `rpd apply` (aws.Backend.EnsureTables) does.
var ErrTableMissing = errors.New("backend table does not exist; run `rpd apply` to create the backend tables")
