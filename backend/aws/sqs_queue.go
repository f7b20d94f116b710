package aws

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pickup"
)

var staleHandle = pickup.ErrStaleHandle

// isStaleHandle reports whether an SQS error code means the receipt handle
// no longer refers to an in-flight delivery.
func isStaleHandle(code, msg string) bool {
	switch code {
	case "ReceiptHandleIsInvalid", "MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight":
		return true
	case "InvalidParameterValue":
		return strings.Contains(msg, "ReceiptHandle") || strings.Contains(msg, "receipt handle")
	}
	return false
}

// Queue is one SQS queue's data plane.
type Queue struct {
	b    *Backend
	name string
}

// Name is the queue's name.
func (q *Queue) Name() string { return q.name }

// Send enqueues body; a zero delay means the queue's default. SQS counts
// delay in seconds: a fraction is rounded up.
func (q *Queue) Send(ctx context.Context, body string, delay time.Duration) error {
	if err := backend.ValidateSend(body, delay); err != nil {
		return fmt.Errorf("queue %s: %w", q.name, err)
	}
	u, err := q.b.queueURL(ctx, q.name)
	if err != nil {
		return err
	}
	in := &sqs.SendMessageInput{QueueUrl: &u, MessageBody: &body}
	if delay > 0 {
		in.DelaySeconds = seconds(delay)
	}
	if _, err := q.b.sqs.SendMessage(ctx, in); err != nil {
		return q.b.sqsError("SendMessage", q.name, err)
	}
	return nil
}

// Receive long-polls for up to wait (whole seconds, rounded up) and hides
// the messages for visibility (0 = the queue's visibility timeout).
func (q *Queue) Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]pickup.Message, error) {
	if err := backend.ValidateReceive(max, visibility, wait); err != nil {
		return nil, fmt.Errorf("queue %s: %w", q.name, err)
	}
	u, err := q.b.queueURL(ctx, q.name)
	if err != nil {
		return nil, err
	}
	out, err := q.b.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    &u,
		MaxNumberOfMessages:         int32(max),
		VisibilityTimeout:           seconds(visibility),
		WaitTimeSeconds:             seconds(wait),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
		// The deprecated form too: local-aws-sqs reads only this one.
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeName(types.MessageSystemAttributeNameApproximateReceiveCount)},
	})
	if err != nil {
		return nil, q.b.sqsError("ReceiveMessage", q.name, err)
	}
	msgs := make([]pickup.Message, 0, len(out.Messages))
	for _, m := range out.Messages {
		n, err := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		if err != nil || n < 1 {
			n = 1
		}
		msgs = append(msgs, pickup.Message{
			ID:            awssdk.ToString(m.MessageId),
			Body:          awssdk.ToString(m.Body),
			ReceiptHandle: awssdk.ToString(m.ReceiptHandle),
			ReceiveCount:  n,
		})
	}
	return msgs, nil
}

// Delete deletes the message delivered under receiptHandle. On a standard
// SQS queue a handle from an earlier delivery still deletes the message and
// succeeds; only a handle SQS rejects (malformed, or of a message already
// gone in some SQS versions) wraps pickup.ErrStaleHandle.
func (q *Queue) Delete(ctx context.Context, receiptHandle string) error {
	if receiptHandle == "" {
		return fmt.Errorf("sqs DeleteMessage %s: empty receipt handle: %w", q.name, pickup.ErrStaleHandle)
	}
	u, err := q.b.queueURL(ctx, q.name)
	if err != nil {
		return err
	}
	if _, err := q.b.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &u, ReceiptHandle: &receiptHandle}); err != nil {
		return q.b.sqsError("DeleteMessage", q.name, err)
	}
	return nil
}

// ChangeVisibility makes the message visible again after timeout.
func (q *Queue) ChangeVisibility(ctx context.Context, receiptHandle string, timeout time.Duration) error {
	if err := backend.ValidateVisibility(timeout); err != nil {
		return fmt.Errorf("queue %s: %w", q.name, err)
	}
	if receiptHandle == "" {
		return fmt.Errorf("sqs ChangeMessageVisibility %s: empty receipt handle: %w", q.name, pickup.ErrStaleHandle)
	}
	u, err := q.b.queueURL(ctx, q.name)
	if err != nil {
		return err
	}
	if _, err := q.b.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: &u, ReceiptHandle: &receiptHandle, VisibilityTimeout: seconds(timeout),
	}); err != nil {
		return q.b.sqsError("ChangeMessageVisibility", q.name, err)
	}
	return nil
}

// DeleteBatch deletes up to 10 messages with DeleteMessageBatch.
func (q *Queue) DeleteBatch(ctx context.Context, receiptHandles []string) error {
	if err := backend.ValidateBatch(receiptHandles); err != nil {
		return fmt.Errorf("delete batch in queue %s: %w", q.name, err)
	}
	u, err := q.b.queueURL(ctx, q.name)
	if err != nil {
		return err
	}
	entries := make([]types.DeleteMessageBatchRequestEntry, len(receiptHandles))
	for i, h := range receiptHandles {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: awssdk.String(strconv.Itoa(i)), ReceiptHandle: awssdk.String(h)}
	}
	out, err := q.b.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &u, Entries: entries})
	if err != nil {
		return q.b.sqsError("DeleteMessageBatch", q.name, err)
	}
	return q.batchError("DeleteMessageBatch", receiptHandles, out.Failed)
}

// ChangeVisibilityBatch changes the visibility of up to 10 messages.
func (q *Queue) ChangeVisibilityBatch(ctx context.Context, receiptHandles []string, timeout time.Duration) error {
	if err := backend.ValidateVisibility(timeout); err != nil {
		return fmt.Errorf("queue %s: %w", q.name, err)
	}
	if err := backend.ValidateBatch(receiptHandles); err != nil {
		return fmt.Errorf("change visibility batch in queue %s: %w", q.name, err)
	}
	u, err := q.b.queueURL(ctx, q.name)
	if err != nil {
		return err
	}
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(receiptHandles))
	for i, h := range receiptHandles {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: awssdk.String(strconv.Itoa(i)), ReceiptHandle: awssdk.String(h), VisibilityTimeout: seconds(timeout)}
	}
	out, err := q.b.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &u, Entries: entries})
	if err != nil {
		return q.b.sqsError("ChangeMessageVisibilityBatch", q.name, err)
	}
	return q.batchError("ChangeMessageVisibilityBatch", receiptHandles, out.Failed)
}

// batchError turns a batch call's failed entries into a *pickup.BatchError.
func (q *Queue) batchError(op string, handles []string, failed []types.BatchResultErrorEntry) error {
	if len(failed) == 0 {
		return nil
	}
	be := &pickup.BatchError{Failed: map[string]error{}}
	for _, f := range failed {
		i, err := strconv.Atoi(awssdk.ToString(f.Id))
		if err != nil || i < 0 || i >= len(handles) {
			return fmt.Errorf("sqs %s %s: the response names an unknown entry %q", op, q.name, awssdk.ToString(f.Id))
		}
		code, msg := awssdk.ToString(f.Code), awssdk.ToString(f.Message)
		cause := fmt.Errorf("sqs %s %s: %s: %s", op, q.name, code, msg)
		if isStaleHandle(code, msg) {
			cause = fmt.Errorf("sqs %s %s: %s: %w", op, q.name, code, pickup.ErrStaleHandle)
		}
		be.Failed[handles[i]] = cause
	}
	return be
}
