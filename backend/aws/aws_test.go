package aws_test

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/aws"
	"github.com/rpdhq/rpd/backend/backendtest"
	"github.com/rpdhq/rpd/internal/awstest"
	"github.com/rpdhq/rpd/runtime/pickup"
)

func open(t testing.TB, opts aws.Options) *aws.Backend {
	t.Helper()
	b, err := aws.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// createTable makes a table as another tool (or an older rpd) would:
// keyed by one string attribute, without rpd's marker or indexes.
func createTable(t testing.TB, e awstest.Endpoints, name, key string) {
	t.Helper()
	if _, err := rawDynamo(t, e).CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            awssdk.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: awssdk.String(key), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: awssdk.String(key), KeyType: types.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
}

func rawDynamo(t testing.TB, e awstest.Endpoints) *dynamodb.Client {
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(awstest.Region), config.WithCredentialsProvider(awstest.Credentials()))
	if err != nil {
		t.Fatal(err)
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = &e.DynamoDB })
}

func TestAWS(t *testing.T) {
	e := awstest.Start(t)

	t.Run("MissingTablesThenEnsureTables", func(t *testing.T) {
		ctx := context.Background()
		stack := backendtest.RandomName("s")
		b := open(t, e.Options(stack, "t"+stack))
		infos, err := b.TableStatus(ctx)
		if err != nil || len(infos) != 3 {
			t.Fatalf("TableStatus = %+v, %v; want 3 tables", infos, err)
		}
		for _, in := range infos {
			if in.Exists || !strings.HasPrefix(in.Name, "t"+stack+"-") {
				t.Errorf("before EnsureTables: %+v; want a missing table named t%s-*", in, stack)
			}
		}
		checks := map[string]error{}
		_, checks["Get"] = b.Instances().Get(ctx, "i")
		_, checks["Transition"] = b.Instances().Transition(ctx, pickup.Transition{ID: "i", From: pickup.StateIdle, To: pickup.StateClaimed})
		_, _, checks["ReadState"] = b.ReadState(ctx)
		_, checks["Lock"] = b.Lock(ctx, backend.LockInfo{Who: "me"}, time.Minute)
		_, checks["LoadLeases"] = b.PoolStore().LoadLeases(ctx)
		for op, err := range checks {
			if !errors.Is(err, backend.ErrTableMissing) || errors.Is(err, pickup.ErrConditionFailed) || !strings.Contains(err.Error(), "t"+stack) {
				t.Errorf("%s before EnsureTables: %v; want ErrTableMissing naming the table", op, err)
			}
		}
		for i := 0; i < 2; i++ { // idempotent
			if err := b.EnsureTables(ctx); err != nil {
				t.Fatalf("EnsureTables #%d: %v", i+1, err)
			}
		}
		infos, err = b.TableStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			if !in.Exists || in.Status != "ACTIVE" || in.Problem != "" {
				t.Errorf("after EnsureTables: %+v; want an ACTIVE table", in)
			}
		}
		if _, err := b.Lock(ctx, backend.LockInfo{Who: "me"}, time.Minute); err != nil {
			t.Errorf("Lock after EnsureTables: %v", err)
		}
	})

	t.Run("ForeignTable", func(t *testing.T) {
		ctx := context.Background()
		stack := backendtest.RandomName("s")
		prefix := "t" + stack
		createTable(t, e, prefix+"-state", "id")
		b := open(t, e.Options(stack, prefix))
		err := b.EnsureTables(ctx)
		if err == nil || !strings.Contains(err.Error(), prefix+"-state") || !strings.Contains(err.Error(), "not an rpd table") {
			t.Errorf("EnsureTables with a foreign table: %v; want an error naming it", err)
		}
	})

	// An instances table made by an rpd before the byOwner index: a
	// retried pickup still finds its owner's claim (by a Scan), and
	// EnsureTables asks for the index without failing.
	t.Run("InstancesTableWithoutOwnerIndex", func(t *testing.T) {
		ctx := context.Background()
		stack := backendtest.RandomName("s")
		prefix := "t" + stack
		createTable(t, e, prefix+"-instances", "instanceId")
		b := open(t, e.Options(stack, prefix))
		in := pickup.Instance{ID: "i-1", Class: "medium", State: pickup.StateClaimed, Owner: "job-1", Threshold: time.Now().Add(time.Hour)}
		if err := b.Instances().Put(ctx, in); err != nil {
			t.Fatal(err)
		}
		infos, err := b.TableStatus(ctx)
		if err != nil || !infos[0].Exists || !infos[0].MissingIndex {
			t.Fatalf("TableStatus = %+v, %v; want the instances table reported without its index", infos, err)
		}
		claimedBy := func(when string) {
			t.Helper()
			got, err := b.Instances().ClaimedBy(ctx, "medium", "job-1")
			if err != nil || len(got) != 1 || got[0].ID != "i-1" {
				t.Fatalf("ClaimedBy %s: %+v, %v; want i-1", when, got, err)
			}
		}
		claimedBy("without the index")
		if err := b.EnsureTables(ctx); err != nil {
			t.Fatal(err)
		}
		// DynamoDB back-fills the index in the background (the emulator
		// does not add one to an existing table at all): either way the
		// lookup keeps working.
		claimedBy("after EnsureTables")
	})

	t.Run("CorruptStateItem", func(t *testing.T) {
		ctx := context.Background()
		stack := backendtest.RandomName("s")
		b := open(t, e.Options(stack, "t"+stack))
		if err := b.EnsureTables(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.WriteState(ctx, []byte(`{"a":1}`), 0); err != nil {
			t.Fatal(err)
		}
		table := "t" + stack + "-state"
		if _, err := rawDynamo(t, e).UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &table,
			Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "state#" + stack}},
			UpdateExpression:          awssdk.String("SET doc = :d"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":d": &types.AttributeValueMemberS{Value: "oops"}},
		}); err != nil {
			t.Fatal(err)
		}
		doc, v, err := b.ReadState(ctx)
		if err == nil || !strings.Contains(err.Error(), table) || doc != nil || v != 0 {
			t.Errorf("ReadState of a corrupt item = %q, %d, %v; want an error naming %s", doc, v, err, table)
		}
	})

	t.Run("EndpointsFromEnvironment", func(t *testing.T) {
		for _, kv := range e.Env() {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		ctx := context.Background()
		stack := backendtest.RandomName("s")
		b := open(t, aws.Options{Stack: stack, TablePrefix: "t" + stack})
		if err := b.CreateQueue(ctx, stack+"-env", backend.QueueAttributes{Tags: map[string]string{backend.StackTag: stack}}); err != nil {
			t.Fatalf("CreateQueue through AWS_ENDPOINT_URL_SQS: %v", err)
		}
		if err := b.EnsureTables(ctx); err != nil {
			t.Fatalf("EnsureTables through AWS_ENDPOINT_URL_DYNAMODB: %v", err)
		}
	})

	t.Run("ThrottlingIsRetried", func(t *testing.T) {
		ctx := context.Background()
		stack := backendtest.RandomName("s")
		opts := e.Options(stack, "t"+stack)
		if err := open(t, opts).EnsureTables(ctx); err != nil {
			t.Fatal(err)
		}
		target, _ := url.Parse(e.DynamoDB)
		proxy := httputil.NewSingleHostReverseProxy(target)
		var calls, throttleFirst atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) <= throttleFirst.Load() {
				body := `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				w.Header().Set("X-Amz-Crc32", fmt.Sprint(crc32.ChecksumIEEE([]byte(body))))
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, body)
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		defer srv.Close()
		opts.DynamoDBEndpoint = srv.URL

		throttleFirst.Store(2)
		if _, _, err := open(t, opts).ReadState(ctx); err != nil {
			t.Errorf("ReadState with 2 throttled attempts: %v; want success after retries", err)
		}
		if got := calls.Load(); got != 3 {
			t.Errorf("%d requests; want 2 throttled + 1 retried", got)
		}

		calls.Store(0)
		throttleFirst.Store(100)
		opts.MaxAttempts = 2
		_, _, err := open(t, opts).ReadState(ctx)
		if err == nil || !strings.Contains(err.Error(), "GetItem") || !strings.Contains(err.Error(), "t"+stack+"-state") || !strings.Contains(err.Error(), "Throttling") {
			t.Errorf("ReadState throttled beyond MaxAttempts: %v; want an error naming GetItem, the table and the throttling", err)
		}
		if got := calls.Load(); got != 2 {
			t.Errorf("%d requests with MaxAttempts 2; want 2", got)
		}
	})
}

func TestOpenValidates(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_PROFILE", "")
	if _, err := aws.Open(context.Background(), aws.Options{Region: "us-east-1"}); err == nil {
		t.Error("Open without a stack succeeded")
	}
	if _, err := aws.Open(context.Background(), aws.Options{Stack: "s", Region: "us-east-1"}); err == nil || !strings.Contains(err.Error(), `TablePrefix is required (rpd's default is "rpd-s")`) {
		t.Errorf("Open without a table prefix: %v; want an error naming the default", err)
	}
	if _, err := aws.Open(context.Background(), aws.Options{Stack: "s", TablePrefix: "rpd-s"}); err == nil || !strings.Contains(err.Error(), "region") {
		t.Errorf("Open without a region: %v; want an error saying so", err)
	}
}
