package aws

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/rpdhq/rpd/backend"
)

// queueURL returns the URL of the named queue, from the cache or GetQueueUrl.
func (b *Backend) queueURL(ctx context.Context, name string) (string, error) {
	b.mu.Lock()
	u, ok := b.urls[name]
	b.mu.Unlock()
	if ok {
		return u, nil
	}
	out, err := b.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String(name)})
	if err != nil {
		return "", b.sqsError("GetQueueUrl", name, err)
	}
	u = awssdk.ToString(out.QueueUrl)
	b.mu.Lock()
	b.urls[name] = u
	b.mu.Unlock()
	return u, nil
}

// sqsError wraps err with the operation and queue, maps a missing queue to
// backend.ErrQueueNotFound (forgetting its cached URL) and an invalid
// receipt handle to pickup.ErrStaleHandle.
func (b *Backend) sqsError(op, name string, err error) error {
	var missing *types.QueueDoesNotExist
	if errors.As(err, &missing) || errorCode(err) == "AWS.SimpleQueueService.NonExistentQueue" {
		b.mu.Lock()
		delete(b.urls, name)
		b.mu.Unlock()
		return fmt.Errorf("sqs %s %s: %w (%v)", op, name, backend.ErrQueueNotFound, err)
	}
	if isStaleHandle(errorCode(err), err.Error()) {
		return fmt.Errorf("sqs %s %s: %w (%v)", op, name, staleHandle, err)
	}
	return fmt.Errorf("sqs %s %s: %w", op, name, err)
}

func queueAttributes(attrs backend.QueueAttributes) map[string]string {
	return map[string]string{
		string(types.QueueAttributeNameVisibilityTimeout):      strconv.Itoa(int(attrs.VisibilityTimeout / time.Second)),
		string(types.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(int(attrs.Retention / time.Second)),
		string(types.QueueAttributeNameDelaySeconds):           strconv.Itoa(int(attrs.Delay / time.Second)),
	}
}

// CreateQueue creates the queue with attrs and tags. An existing queue with
// the same attributes succeeds (its tags are merged with TagQueue); with
// different ones SQS refuses (QueueNameExists), and so does this.
func (b *Backend) CreateQueue(ctx context.Context, name string, attrs backend.QueueAttributes) error {
	if err := backend.ValidateQueueName(name); err != nil {
		return fmt.Errorf("create queue: %w", err)
	}
	attrs, err := backend.NormalizeQueueAttributes(attrs)
	if err != nil {
		return fmt.Errorf("create queue %s: %w", name, err)
	}
	out, err := b.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  awssdk.String(name),
		Attributes: queueAttributes(attrs),
		Tags:       attrs.Tags,
	})
	if err != nil {
		return b.sqsError("CreateQueue", name, err)
	}
	u := awssdk.ToString(out.QueueUrl)
	b.mu.Lock()
	b.urls[name] = u
	b.mu.Unlock()
	// CreateQueue ignores Tags when the queue already existed.
	if len(attrs.Tags) > 0 {
		if _, err := b.sqs.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: &u, Tags: attrs.Tags}); err != nil {
			return b.sqsError("TagQueue", name, err)
		}
	}
	return nil
}

// UpdateQueue applies the attributes that differ with SetQueueAttributes and
// merges tags with TagQueue.
func (b *Backend) UpdateQueue(ctx context.Context, name string, attrs backend.QueueAttributes) error {
	attrs, err := backend.NormalizeQueueAttributes(attrs)
	if err != nil {
		return fmt.Errorf("update queue %s: %w", name, err)
	}
	u, err := b.queueURL(ctx, name)
	if err != nil {
		return err
	}
	cur, err := b.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &u, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		return b.sqsError("GetQueueAttributes", name, err)
	}
	diff := map[string]string{}
	for k, v := range queueAttributes(attrs) {
		if cur.Attributes[k] != v {
			diff[k] = v
		}
	}
	if len(diff) > 0 {
		if _, err := b.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &u, Attributes: diff}); err != nil {
			return b.sqsError("SetQueueAttributes", name, err)
		}
		b.log.Debug("updated queue attributes", "queue", name, "changed", diff)
	}
	if len(attrs.Tags) > 0 {
		if _, err := b.sqs.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: &u, Tags: attrs.Tags}); err != nil {
			return b.sqsError("TagQueue", name, err)
		}
	}
	return nil
}

// DeleteQueue deletes the queue and its messages.
func (b *Backend) DeleteQueue(ctx context.Context, name string) error {
	u, err := b.queueURL(ctx, name)
	if err != nil {
		return err
	}
	if _, err := b.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &u}); err != nil {
		return b.sqsError("DeleteQueue", name, err)
	}
	b.mu.Lock()
	delete(b.urls, name)
	b.mu.Unlock()
	return nil
}

// DescribeQueue returns the queue's attributes, tags (as they are, so a
// queue without the stack's tag can be reported as not managed by rpd) and
// approximate counts.
func (b *Backend) DescribeQueue(ctx context.Context, name string) (backend.QueueInfo, error) {
	info := backend.QueueInfo{Name: name}
	u, err := b.queueURL(ctx, name)
	if err != nil {
		return info, err
	}
	info.URL = u
	out, err := b.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &u, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		return info, b.sqsError("GetQueueAttributes", name, err)
	}
	num := func(k types.QueueAttributeName) (int, error) {
		s, ok := out.Attributes[string(k)]
		if !ok {
			return 0, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("sqs GetQueueAttributes %s: attribute %s is %q, not a number", name, k, s)
		}
		return n, nil
	}
	var vis, ret, del int
	for _, f := range []struct {
		dst *int
		k   types.QueueAttributeName
	}{
		{&vis, types.QueueAttributeNameVisibilityTimeout},
		{&ret, types.QueueAttributeNameMessageRetentionPeriod},
		{&del, types.QueueAttributeNameDelaySeconds},
		{&info.Visible, types.QueueAttributeNameApproximateNumberOfMessages},
		{&info.InFlight, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
		{&info.Delayed, types.QueueAttributeNameApproximateNumberOfMessagesDelayed},
	} {
		if *f.dst, err = num(f.k); err != nil {
			return info, err
		}
	}
	tags, err := b.sqs.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: &u})
	if err != nil {
		return info, b.sqsError("ListQueueTags", name, err)
	}
	if tags.Tags == nil {
		tags.Tags = map[string]string{}
	}
	info.Attributes = backend.QueueAttributes{
		VisibilityTimeout: time.Duration(vis) * time.Second,
		Retention:         time.Duration(ret) * time.Second,
		Delay:             time.Duration(del) * time.Second,
		Tags:              tags.Tags,
	}
	return info, nil
}

// ListQueues returns the names of the queues whose name starts with prefix.
func (b *Backend) ListQueues(ctx context.Context, prefix string) ([]string, error) {
	in := &sqs.ListQueuesInput{MaxResults: awssdk.Int32(1000)}
	if prefix != "" {
		in.QueueNamePrefix = awssdk.String(prefix)
	}
	var names []string
	p := sqs.NewListQueuesPaginator(b.sqs, in)
	for pages := 0; p.HasMorePages(); pages++ {
		if pages > 1000 {
			return nil, fmt.Errorf("sqs ListQueues %q*: more than 1000 pages; the endpoint keeps returning a next token", prefix)
		}
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, b.sqsError("ListQueues", prefix+"*", err)
		}
		for _, u := range out.QueueUrls {
			if n := path.Base(u); strings.HasPrefix(n, prefix) {
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	return names, nil
}
