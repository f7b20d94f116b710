package awstest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/rpdhq/rpd/internal/awstest"
)

// TestSmoke talks to both emulators through aws-sdk-go-v2, configured only
// by the environment Endpoints.Env returns (the SDK's standard chain).
func TestSmoke(t *testing.T) {
	e := awstest.Start(t)
	for _, kv := range e.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}

	q := sqs.NewFromConfig(cfg)
	created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String("smoke")})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	sent := time.Now()
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: created.QueueUrl, MessageBody: awssdk.String("hello"), DelaySeconds: 1}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	got, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, WaitTimeSeconds: 3})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	if len(got.Messages) != 1 || awssdk.ToString(got.Messages[0].Body) != "hello" {
		t.Fatalf("got %d messages %+v; want the one sent", len(got.Messages), got.Messages)
	}
	if waited := time.Since(sent); waited < 900*time.Millisecond {
		t.Errorf("received %v after sending with DelaySeconds=1; want >= 1s", waited)
	}

	d := dynamodb.NewFromConfig(cfg)
	table := awssdk.String("smoke")
	if _, err := d.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            table,
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: awssdk.String("id"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: awssdk.String("id"), KeyType: ddbtypes.KeyTypeHash}},
	}); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	if err := dynamodb.NewTableExistsWaiter(d, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 50 * time.Millisecond
		o.MaxDelay = time.Second
	}).Wait(ctx, &dynamodb.DescribeTableInput{TableName: table}, 20*time.Second); err != nil {
		t.Fatalf("table not active: %v", err)
	}
	key := map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: "i-1"}}
	if _, err := d.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: map[string]ddbtypes.AttributeValue{
		"id": key["id"], "state": &ddbtypes.AttributeValueMemberS{Value: "idle"},
	}}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}
	update := func() error {
		_, err := d.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: table, Key: key,
			UpdateExpression:          awssdk.String("SET #s = :to"),
			ConditionExpression:       awssdk.String("#s = :from"),
			ExpressionAttributeNames:  map[string]string{"#s": "state"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":from": &ddbtypes.AttributeValueMemberS{Value: "idle"}, ":to": &ddbtypes.AttributeValueMemberS{Value: "claimed"}},
		})
		return err
	}
	if err := update(); err != nil {
		t.Fatalf("first conditional UpdateItem: %v", err)
	}
	var cf *ddbtypes.ConditionalCheckFailedException
	if err := update(); !errors.As(err, &cf) {
		t.Fatalf("second conditional UpdateItem: got %v; want ConditionalCheckFailedException", err)
	}
}

// TestStopsOnCleanup checks that the emulators stop with the test.
func TestStopsOnCleanup(t *testing.T) {
	var e awstest.Endpoints
	t.Run("inner", func(t *testing.T) { e = awstest.Start(t) })
	if e.SQS == "" {
		t.Skip("emulators unavailable")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cfg, _ := config.LoadDefaultConfig(ctx, config.WithRegion(awstest.Region), config.WithCredentialsProvider(awstest.Credentials()))
	q := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = &e.SQS; o.RetryMaxAttempts = 1 })
	if _, err := q.ListQueues(ctx, &sqs.ListQueuesInput{}); err == nil {
		t.Fatal("the SQS emulator still answers after its test's cleanup")
	}
}
