package aws

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// InstanceTable is the instance table on DynamoDB (<prefix>-instances).
// List is a consistent Scan filtered on class and state: fine for the few
// thousand instances of a stack, and it keeps the table to one key.
type InstanceTable struct {
	b *Backend
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNanos(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, v).UTC()
}

// instanceItem is the item form of a record. An empty owner is left out,
// so the item never holds an empty string (and the byOwner index holds
// only owned items); so is a zero claim deadline.
func instanceItem(in pickup.Instance) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		"instanceId": s(in.ID),
		"class":      s(in.Class),
		"state":      s(string(in.State)),
		"cpu":        n(int64(in.CPU)),
		"memMiB":     n(int64(in.MemMiB)),
		"threshold":  n(unixNanos(in.Threshold)),
		"updatedAt":  n(unixNanos(in.UpdatedAt)),
	}
	if !in.ClaimExpires.IsZero() {
		item["claimExpires"] = n(unixNanos(in.ClaimExpires))
	}
	for k, v := range map[string]string{"owner": in.Owner, "usageClass": in.UsageClass, "instanceType": in.InstanceType, "resourceClass": in.ResourceClass} {
		if v != "" {
			item[k] = s(v)
		}
	}
	return item
}

// itemReader reads typed attributes of an item, remembering the first
// malformed one.
type itemReader struct {
	item map[string]types.AttributeValue
	err  error
}

func (r *itemReader) str(k string) string {
	switch v := r.item[k].(type) {
	case nil:
		return ""
	case *types.AttributeValueMemberS:
		return v.Value
	default:
		if r.err == nil {
			r.err = fmt.Errorf("attribute %s is %T, not a string", k, v)
		}
		return ""
	}
}

func (r *itemReader) num(k string) int64 {
	switch v := r.item[k].(type) {
	case nil:
		return 0
	case *types.AttributeValueMemberN:
		x, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil && r.err == nil {
			r.err = fmt.Errorf("attribute %s is %q, not an integer", k, v.Value)
		}
		return x
	default:
		if r.err == nil {
			r.err = fmt.Errorf("attribute %s is %T, not a number", k, v)
		}
		return 0
	}
}

func (r *itemReader) bytes(k string) []byte {
	switch v := r.item[k].(type) {
	case nil:
		return nil
	case *types.AttributeValueMemberB:
		return v.Value
	default:
		if r.err == nil {
			r.err = fmt.Errorf("attribute %s is %T, not binary", k, v)
		}
		return nil
	}
}

func parseInstance(item map[string]types.AttributeValue) (pickup.Instance, error) {
	r := itemReader{item: item}
	in := pickup.Instance{
		ID:            r.str("instanceId"),
		Class:         r.str("class"),
		State:         pickup.State(r.str("state")),
		Owner:         r.str("owner"),
		UsageClass:    r.str("usageClass"),
		InstanceType:  r.str("instanceType"),
		CPU:           int(r.num("cpu")),
		MemMiB:        int(r.num("memMiB")),
		ResourceClass: r.str("resourceClass"),
		Threshold:     fromUnixNanos(r.num("threshold")),
		UpdatedAt:     fromUnixNanos(r.num("updatedAt")),
		ClaimExpires:  fromUnixNanos(r.num("claimExpires")),
	}
	return in, r.err
}

// Put creates or replaces a record. A zero UpdatedAt is set to now.
func (t *InstanceTable) Put(ctx context.Context, in pickup.Instance) error {
	if in.ID == "" || in.Class == "" || in.State == "" {
		return fmt.Errorf("put instance %q: ID, Class and State are required", in.ID)
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = t.b.clock()
	}
	if err := backend.ValidateStoredTime("put instance "+in.ID+": threshold", in.Threshold); err != nil {
		return err
	}
	table := t.b.tableName(RoleInstances)
	if _, err := t.b.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: instanceItem(in)}); err != nil {
		return ddbError("PutItem", table, fmt.Errorf("instance %s: %w", in.ID, err))
	}
	return nil
}

// Get returns a record (consistent read) or an error wrapping pickup.ErrNotFound.
func (t *InstanceTable) Get(ctx context.Context, id string) (pickup.Instance, error) {
	table := t.b.tableName(RoleInstances)
	out, err := t.b.ddb.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &table, Key: map[string]types.AttributeValue{"instanceId": s(id)}, ConsistentRead: awssdk.Bool(true),
	})
	if err != nil {
		return pickup.Instance{}, ddbError("GetItem", table, fmt.Errorf("instance %s: %w", id, err))
	}
	if out.Item == nil {
		return pickup.Instance{}, fmt.Errorf("instance %s in %s: %w", id, table, pickup.ErrNotFound)
	}
	in, err := parseInstance(out.Item)
	if err != nil {
		return pickup.Instance{}, fmt.Errorf("dynamodb GetItem %s: instance %s is malformed: %w", table, id, err)
	}
	return in, nil
}

// Transition applies tr with one conditional UpdateItem. A failed
// condition (ConditionalCheckFailedException, a missing record included)
// wraps pickup.ErrConditionFailed; every other error is transient.
func (t *InstanceTable) Transition(ctx context.Context, tr pickup.Transition) (pickup.Instance, error) {
	if tr.ID == "" || tr.From == "" || tr.To == "" {
		return pickup.Instance{}, fmt.Errorf("transition instance %q: ID, From and To are required", tr.ID)
	}
	updated := tr.Now
	if updated.IsZero() {
		updated = t.b.clock()
	}
	names := map[string]string{"#id": "instanceId", "#state": "state", "#owner": "owner", "#updated": "updatedAt"}
	values := map[string]types.AttributeValue{":from": s(string(tr.From)), ":to": s(string(tr.To)), ":updated": n(unixNanos(updated))}
	cond := "attribute_exists(#id) AND #state = :from"
	if tr.ExpectOwner == "" {
		cond += " AND attribute_not_exists(#owner)"
	} else {
		cond += " AND #owner = :expectOwner"
		values[":expectOwner"] = s(tr.ExpectOwner)
	}
	if !tr.Now.IsZero() {
		cond += " AND #threshold > :now"
		names["#threshold"] = "threshold"
		values[":now"] = n(unixNanos(tr.Now))
	}
	if !tr.LapsedBy.IsZero() {
		cond += " AND #claimExpires <= :lapsedBy" // false when the attribute is absent
		values[":lapsedBy"] = n(unixNanos(tr.LapsedBy))
	}
	names["#claimExpires"] = "claimExpires"
	update := "SET #state = :to, #updated = :updated"
	var remove []string
	if tr.Owner == "" {
		remove = append(remove, "#owner")
	} else {
		update += ", #owner = :owner"
		values[":owner"] = s(tr.Owner)
	}
	if tr.ClaimExpires.IsZero() {
		remove = append(remove, "#claimExpires")
	} else {
		update += ", #claimExpires = :claimExpires"
		values[":claimExpires"] = n(unixNanos(tr.ClaimExpires))
	}
	if len(remove) > 0 {
		update += " REMOVE " + strings.Join(remove, ", ")
	}
	table := t.b.tableName(RoleInstances)
	out, err := t.b.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &table,
		Key:                       map[string]types.AttributeValue{"instanceId": s(tr.ID)},
		ConditionExpression:       &cond,
		UpdateExpression:          &update,
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		return pickup.Instance{}, fmt.Errorf("transition instance %s %s→%s (expected owner %q) in %s: %w", tr.ID, tr.From, tr.To, tr.ExpectOwner, table, pickup.ErrConditionFailed)
	}
	if err != nil {
		return pickup.Instance{}, ddbError("UpdateItem", table, fmt.Errorf("transition instance %s (transient, retry): %w", tr.ID, err))
	}
	in, err := parseInstance(out.Attributes)
	if err != nil {
		return pickup.Instance{}, fmt.Errorf("dynamodb UpdateItem %s: instance %s is malformed: %w", table, tr.ID, err)
	}
	return in, nil
}

// ClaimedBy returns the records of one class claimed by owner, by ID. It
// queries the byOwner index (sparse: only owned items are in it) and reads
// each hit again consistently, since an index is eventually consistent: a
// hit that is no longer owner's claim is left out. An index lags the table
// by a fraction of a second, so a claim committed that recently may be
// missed. On a table without the index (created by an older rpd and not
// yet upgraded by EnsureTables) it falls back to a consistent Scan.
func (t *InstanceTable) ClaimedBy(ctx context.Context, class, owner string) ([]pickup.Instance, error) {
	if owner == "" {
		return nil, fmt.Errorf("instances of class %s claimed by an empty owner: name the owner", class)
	}
	table := t.b.tableName(RoleInstances)
	names := map[string]string{"#owner": "owner", "#class": "class", "#state": "state"}
	values := map[string]types.AttributeValue{":owner": s(owner), ":class": s(class), ":claimed": s(string(pickup.StateClaimed))}
	key, filter := "#owner = :owner", "#class = :class AND #state = :claimed"
	p := dynamodb.NewQueryPaginator(t.b.ddb, &dynamodb.QueryInput{
		TableName: &table, IndexName: awssdk.String(ownerIndex), KeyConditionExpression: &key, FilterExpression: &filter,
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	})
	var hits []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if isMissingIndex(err) {
			return t.scan(ctx, "#class = :class AND #state = :claimed AND #owner = :owner", names, values)
		}
		if err != nil {
			return nil, ddbError("Query", table+"/"+ownerIndex, fmt.Errorf("class %s owner %q: %w", class, owner, err))
		}
		for _, item := range page.Items {
			in, err := parseInstance(item)
			if err != nil {
				return nil, fmt.Errorf("dynamodb Query %s/%s: malformed instance %q: %w", table, ownerIndex, in.ID, err)
			}
			hits = append(hits, in.ID)
		}
	}
	var out []pickup.Instance
	for _, id := range hits {
		in, err := t.Get(ctx, id)
		if errors.Is(err, pickup.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if in.Class == class && in.State == pickup.StateClaimed && in.Owner == owner {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// List returns the records of one class in one state ("" = any), by ID.
func (t *InstanceTable) List(ctx context.Context, class string, state pickup.State) ([]pickup.Instance, error) {
	filter := "#class = :class"
	names := map[string]string{"#class": "class"}
	values := map[string]types.AttributeValue{":class": s(class)}
	if state != "" {
		filter += " AND #state = :state"
		names["#state"] = "state"
		values[":state"] = s(string(state))
	}
	return t.scan(ctx, filter, names, values)
}

// scan is a consistent, filtered Scan of the table, sorted by ID.
func (t *InstanceTable) scan(ctx context.Context, filter string, names map[string]string, values map[string]types.AttributeValue) ([]pickup.Instance, error) {
	table := t.b.tableName(RoleInstances)
	p := dynamodb.NewScanPaginator(t.b.ddb, &dynamodb.ScanInput{
		TableName: &table, FilterExpression: &filter, ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ConsistentRead: awssdk.Bool(true),
	})
	var out []pickup.Instance
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, ddbError("Scan", table, fmt.Errorf("%s: %w", filter, err))
		}
		for _, item := range page.Items {
			in, err := parseInstance(item)
			if err != nil {
				return nil, fmt.Errorf("dynamodb Scan %s: malformed instance %q: %w", table, in.ID, err)
			}
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
