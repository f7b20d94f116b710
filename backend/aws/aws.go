package aws

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/internal/awsconfig"
	"github.com/rpdhq/rpd/backend/internal/groupcommit"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/runtime/pools"
)

// Options configure Open. Unset fields fall back to the SDK's standard
// configuration chain (environment, shared config files, instance role).
type Options struct {
	// Stack names the stack whose state, lock and pool leases this backend
	// reads and writes. Required.
	Stack string
	// Region and Profile override the chain's region and shared-config profile.
	Region, Profile string
	// TablePrefix prefixes the DynamoDB table names: the tables are
	// <prefix>-instances, <prefix>-state and <prefix>-leases. Required;
	// rpd's default is backend.DefaultTablePrefix(Stack).
	TablePrefix string
	// SQSEndpoint and DynamoDBEndpoint override the service endpoints
	// (emulators); empty means the chain's (AWS_ENDPOINT_URL_SQS, …).
	SQSEndpoint, DynamoDBEndpoint string
	// Credentials overrides the chain's credentials (tests use static ones).
	Credentials awssdk.CredentialsProvider
	// MaxAttempts bounds the SDK retryer's attempts per call, throttling
	// included (default 8, with exponential backoff up to 5s).
	MaxAttempts int
	// Clock returns the current time; nil means time.Now. It decides lock
	// lease expiry and a transition's default UpdatedAt.
	Clock func() time.Time
	// Logger receives logs; nil discards them.
	Logger *slog.Logger
}

// Backend is a connection to SQS and DynamoDB. It is safe for concurrent use.
type Backend struct {
	stack  string
	prefix string
	clock  func() time.Time
	log    *slog.Logger
	sqs    *sqs.Client
	ddb    *dynamodb.Client

	mu   sync.Mutex
	urls map[string]string // queue name -> URL, filled by GetQueueUrl

	// records writes the grant-record items by group commit (commit.go),
	// started by the first such write.
	recordsOnce sync.Once
	records     *groupcommit.Queue[itemWrite]
}

var (
	_ backend.QueueAdmin   = (*Backend)(nil)
	_ backend.StateStore   = (*Backend)(nil)
	_ backend.Locker       = (*Backend)(nil)
	_ backend.TableAdmin   = (*Backend)(nil)
	_ backend.LeaderStore  = (*Backend)(nil)
	_ backend.GrantStore   = (*GrantStore)(nil)
	_ pickup.Queue         = (*Queue)(nil)
	_ pickup.InstanceTable = (*InstanceTable)(nil)
	_ pools.Store          = (*PoolStore)(nil)
)

// Open loads the AWS configuration and builds the clients. It makes no call
// to AWS: a missing table or queue shows up on first use.
func Open(ctx context.Context, opts Options) (*Backend, error) {
	if opts.Stack == "" {
		return nil, errors.New("aws backend: Options.Stack is required")
	}
	if opts.TablePrefix == "" {
		return nil, fmt.Errorf("aws backend: Options.TablePrefix is required (rpd's default is %q)", backend.DefaultTablePrefix(opts.Stack))
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := awsconfig.Load(ctx, "aws backend", awsconfig.Options{Region: opts.Region, Profile: opts.Profile,
		Credentials: opts.Credentials, MaxAttempts: opts.MaxAttempts})
	if err != nil {
		return nil, err
	}
	b := &Backend{
		stack:  opts.Stack,
		prefix: opts.TablePrefix,
		clock:  opts.Clock,
		log:    opts.Logger,
		urls:   map[string]string{},
	}
	b.sqs = sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if opts.SQSEndpoint != "" {
			o.BaseEndpoint = awssdk.String(opts.SQSEndpoint)
		}
	})
	b.ddb = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if opts.DynamoDBEndpoint != "" {
			o.BaseEndpoint = awssdk.String(opts.DynamoDBEndpoint)
		}
	})
	return b, nil
}

// Stack is the stack this backend serves.
func (b *Backend) Stack() string { return b.stack }

// TablePrefix prefixes this backend's DynamoDB table names.
func (b *Backend) TablePrefix() string { return b.prefix }

// Queue returns the data plane of the named queue. Its URL is looked up on
// first use; a missing queue fails with an error wrapping
// backend.ErrQueueNotFound.
func (b *Backend) Queue(name string) *Queue { return &Queue{b: b, name: name} }

// Instances returns the instance table (<prefix>-instances).
func (b *Backend) Instances() *InstanceTable { return &InstanceTable{b: b} }

// PoolStore returns the persistence of this stack's pool leases
// (<prefix>-leases).
func (b *Backend) PoolStore() *PoolStore { return &PoolStore{b: b} }

// errorCode returns the AWS error code of err, "" if it has none.
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// seconds converts d to whole seconds for SQS, rounding up so a delay or
// visibility is never shorter than asked.
func seconds(d time.Duration) int32 {
	return int32(math.Ceil(d.Seconds()))
}
