// Package aws is rpd's backend on AWS: runner-class queues on SQS, and the
// instance table, the stack's state document and lock, and pool leases on
// DynamoDB, all through aws-sdk-go-v2 with the SDK's standard configuration
// chain (credentials, region, AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL_DYNAMODB).
//
// It has the same semantics as backend/local and passes the same conformance
// suite (backend/backendtest), except where SQS itself differs, which
// docs/backends.md lists: chiefly that deleting with a stale receipt handle
// of a standard queue succeeds instead of failing with ErrStaleHandle.
//
// Start reading at Open (aws.go); tables.go holds the DynamoDB layout and
// EnsureTables, the only code that creates tables. Every other method
// reports a missing table as an error wrapping backend.ErrTableMissing.
package aws
