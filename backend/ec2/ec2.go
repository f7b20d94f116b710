package ec2

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/rpdhq/rpd/backend/internal/awsconfig"
	"github.com/rpdhq/rpd/runtime/fleet"
	"github.com/rpdhq/rpd/runtime/ledger"
)

// Tags rpd puts on every VM it launches.
const (
	StackTag  = "rpd:stack"
	ClassTag  = "rpd:class"
	LaunchTag = "rpd:launch"
)

// Options configure Open. Unset fields fall back to the SDK's standard
// configuration chain (environment, shared config files, instance role),
// the chain the aws backend reads too.
type Options struct {
	// Stack is the stack whose VMs this client launches, lists and
	// terminates (the rpd:stack tag). Required.
	Stack string
	// Region and Profile override the chain's.
	Region, Profile string
	// Endpoint overrides the EC2 endpoint; empty means the chain's
	// (AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL, …).
	Endpoint string
	// Credentials overrides the chain's credentials (tests).
	Credentials awssdk.CredentialsProvider
	// MaxAttempts bounds the SDK retryer's attempts per call, throttling
	// included (default 8, exponential backoff up to 5s).
	MaxAttempts int
	// MaxBackoff bounds one retry's backoff (default 5s).
	MaxBackoff time.Duration
	// Logger receives logs; nil discards them.
	Logger *slog.Logger
}

// Client is the stack's EC2: a fleet.Cloud, and the source of usage "ec2"
// figures. It is safe for concurrent use.
type Client struct {
	stack string
	ec2   *ec2.Client
	log   *slog.Logger

	mu    sync.Mutex
	vcpus map[string]int // by instance type, from DescribeInstanceTypes
}

var _ fleet.Cloud = (*Client)(nil)

// Open loads the AWS configuration and builds the client. It makes no call
// to AWS.
func Open(ctx context.Context, opts Options) (*Client, error) {
	if opts.Stack == "" {
		return nil, errors.New("ec2: Options.Stack is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := awsconfig.Load(ctx, "ec2", awsconfig.Options{Region: opts.Region, Profile: opts.Profile,
		Credentials: opts.Credentials, MaxAttempts: opts.MaxAttempts, MaxBackoff: opts.MaxBackoff})
	if err != nil {
		return nil, err
	}
	c := &Client{stack: opts.Stack, log: opts.Logger, vcpus: map[string]int{}}
	c.ec2 = ec2.NewFromConfig(cfg, func(o *ec2.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = awssdk.String(opts.Endpoint)
		}
	})
	return c, nil
}

// Launch starts req.Count VMs with one CreateFleet call of type instant:
// the class's launch template, its instance types × subnets as overrides,
// spot or on-demand, every VM tagged with the stack, the class and the
// launch, and req.ClientToken as the idempotency token. The errors EC2
// reports for the parts it could not start come back in the result; a call
// EC2 refused as a whole is a *fleet.APIError; throttling is retried by
// the SDK.
func (c *Client) Launch(ctx context.Context, req fleet.LaunchRequest) (fleet.LaunchResult, error) {
	if req.Count < 1 {
		return fleet.LaunchResult{}, nil
	}
	spec := req.Spec
	lt := &types.FleetLaunchTemplateSpecificationRequest{Version: awssdk.String(cmpOr(spec.Version, "$Default"))}
	if strings.HasPrefix(spec.Template, "lt-") {
		lt.LaunchTemplateId = awssdk.String(spec.Template)
	} else {
		lt.LaunchTemplateName = awssdk.String(spec.Template)
	}
	var overrides []types.FleetLaunchTemplateOverridesRequest
	subnets := spec.Subnets
	if len(subnets) == 0 {
		subnets = []string{""}
	}
	for _, t := range spec.InstanceTypes {
		for _, s := range subnets {
			o := types.FleetLaunchTemplateOverridesRequest{InstanceType: types.InstanceType(t)}
			if s != "" {
				o.SubnetId = awssdk.String(s)
			}
			overrides = append(overrides, o)
		}
	}
	capType := types.DefaultTargetCapacityTypeOnDemand
	tcs := &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: awssdk.Int32(int32(req.Count))}
	in := &ec2.CreateFleetInput{
		Type:                  types.FleetTypeInstant,
		ClientToken:           awssdk.String(clientToken(req.ClientToken)),
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{LaunchTemplateSpecification: lt, Overrides: overrides}},
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{
			{Key: awssdk.String(StackTag), Value: awssdk.String(c.stack)},
			{Key: awssdk.String(ClassTag), Value: awssdk.String(req.Class)},
			{Key: awssdk.String(LaunchTag), Value: awssdk.String(req.LaunchID)},
		}}},
	}
	if req.Lifecycle == fleet.Spot {
		capType = types.DefaultTargetCapacityTypeSpot
		tcs.SpotTargetCapacity = awssdk.Int32(int32(req.Count))
		in.SpotOptions = &types.SpotOptionsRequest{AllocationStrategy: types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		tcs.OnDemandTargetCapacity = awssdk.Int32(int32(req.Count))
	}
	tcs.DefaultTargetCapacityType = capType
	in.TargetCapacitySpecification = tcs
	out, err := c.ec2.CreateFleet(ctx, in)
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ctx.Err() == nil {
			return fleet.LaunchResult{}, &fleet.APIError{Code: ae.ErrorCode(), Message: ae.ErrorMessage()}
		}
		return fleet.LaunchResult{}, fmt.Errorf("ec2: CreateFleet: %w", err)
	}
	var res fleet.LaunchResult
	now := time.Now()
	for _, fi := range out.Instances {
		for _, id := range fi.InstanceIds {
			res.Instances = append(res.Instances, fleet.Instance{
				ID: id, State: fleet.InstancePending, LaunchedAt: now, Class: req.Class, Launch: req.LaunchID,
				Lifecycle: lifecycleOf(string(fi.Lifecycle), req.Lifecycle), Type: string(fi.InstanceType),
			})
		}
	}
	for _, fe := range out.Errors {
		res.Errors = append(res.Errors, fleet.LaunchError{Code: awssdk.ToString(fe.ErrorCode), Message: awssdk.ToString(fe.ErrorMessage)})
	}
	return res, nil
}

// clientToken keeps a token within EC2's 64 characters.
func clientToken(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

func lifecycleOf(got, asked string) string {
	switch got {
	case "spot":
		return fleet.Spot
	case "on-demand":
		return fleet.OnDemand
	}
	return asked
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Instances lists the stack's instances (every state), by their rpd:stack
// tag.
func (c *Client) Instances(ctx context.Context) ([]fleet.Instance, error) {
	return c.describe(ctx, nil)
}

func (c *Client) describe(ctx context.Context, extra []types.Filter) ([]fleet.Instance, error) {
	in := &ec2.DescribeInstancesInput{Filters: append([]types.Filter{{Name: awssdk.String("tag:" + StackTag), Values: []string{c.stack}}}, extra...)}
	var out []fleet.Instance
	p := ec2.NewDescribeInstancesPaginator(c.ec2, in)
	for pages := 0; p.HasMorePages(); pages++ {
		if pages == 10000 {
			return nil, errors.New("ec2: DescribeInstances returned more than 10000 pages")
		}
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("ec2: DescribeInstances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				fi := fleet.Instance{ID: awssdk.ToString(i.InstanceId), LaunchedAt: awssdk.ToTime(i.LaunchTime), Type: string(i.InstanceType), Lifecycle: fleet.OnDemand}
				if i.State != nil {
					fi.State = string(i.State.Name)
				}
				if i.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
					fi.Lifecycle = fleet.Spot
				}
				for _, t := range i.Tags {
					switch awssdk.ToString(t.Key) {
					case ClassTag:
						fi.Class = awssdk.ToString(t.Value)
					case LaunchTag:
						fi.Launch = awssdk.ToString(t.Value)
					}
				}
				out = append(out, fi)
			}
		}
	}
	slices.SortFunc(out, func(a, b fleet.Instance) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// maxTerminate is TerminateInstances' limit of IDs per call.
const maxTerminate = 1000

// Terminate terminates ids. An ID EC2 no longer knows is skipped (it is
// gone already); the call is retried without it.
func (c *Client) Terminate(ctx context.Context, ids []string) error {
	ids = slices.Clone(ids)
	for len(ids) > 0 {
		n := min(len(ids), maxTerminate)
		chunk := ids[:n]
		for attempt := 0; len(chunk) > 0; attempt++ {
			_, err := c.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: chunk})
			if err == nil {
				break
			}
			var ae smithy.APIError
			if attempt < 5 && errors.As(err, &ae) && ae.ErrorCode() == "InvalidInstanceID.NotFound" {
				chunk = slices.DeleteFunc(chunk, func(id string) bool { return strings.Contains(ae.ErrorMessage(), id) })
				continue
			}
			return fmt.Errorf("ec2: TerminateInstances: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}

// UsageSource is a vm_ceiling's usage "ec2": the stack's pending and
// running instances (with Tags as extra filters), counted as VMs or as
// the sum of their types' vCPUs.
type UsageSource struct {
	Client *Client
	// VCPUs counts vCPUs instead of instances.
	VCPUs bool
	// Tags are extra tag filters (key = value).
	Tags map[string]string
}

var _ ledger.UsageSource = (*UsageSource)(nil)

// Usage asks EC2 for the figure now; an error is "no figure".
func (u *UsageSource) Usage(ctx context.Context) (ledger.Reading, error) {
	at := time.Now()
	filters := []types.Filter{{Name: awssdk.String("instance-state-name"), Values: []string{"pending", "running"}}}
	for _, k := range slices.Sorted(maps.Keys(u.Tags)) {
		filters = append(filters, types.Filter{Name: awssdk.String("tag:" + k), Values: []string{u.Tags[k]}})
	}
	insts, err := u.Client.describe(ctx, filters)
	if err != nil {
		return ledger.Reading{}, err
	}
	if !u.VCPUs {
		return ledger.Reading{Active: len(insts), At: at}, nil
	}
	n := 0
	for _, i := range insts {
		v, err := u.Client.VCPUs(ctx, i.Type)
		if err != nil {
			return ledger.Reading{}, err
		}
		n += v
	}
	return ledger.Reading{Active: n, At: at}, nil
}

// VCPUs returns an instance type's default vCPUs, from DescribeInstanceTypes
// (cached: a type's vCPUs never change).
func (c *Client) VCPUs(ctx context.Context, instanceType string) (int, error) {
	c.mu.Lock()
	v, ok := c.vcpus[instanceType]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	out, err := c.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{types.InstanceType(instanceType)}})
	if err != nil {
		return 0, fmt.Errorf("ec2: DescribeInstanceTypes %s: %w", instanceType, err)
	}
	if len(out.InstanceTypes) == 0 || out.InstanceTypes[0].VCpuInfo == nil || out.InstanceTypes[0].VCpuInfo.DefaultVCpus == nil {
		return 0, fmt.Errorf("ec2: DescribeInstanceTypes does not know the vCPUs of %s", instanceType)
	}
	v = int(*out.InstanceTypes[0].VCpuInfo.DefaultVCpus)
	c.mu.Lock()
	c.vcpus[instanceType] = v
	c.mu.Unlock()
	return v, nil
}
