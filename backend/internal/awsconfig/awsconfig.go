// Package awsconfig loads the AWS SDK configuration the aws backend and the
// EC2 adapter share: the SDK's own chain (environment, shared files,
// AWS_ENDPOINT_URL_<SERVICE>, instance roles) with rpd's region, profile
// and credentials overrides, and a retryer that backs off on throttling
// without the client-side retry quota, so that a busy daemon's calls are
// slowed, not failed.
package awsconfig

import (
	"context"
	"errors"
	"fmt"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Options override the SDK's configuration chain; zero values keep it.
type Options struct {
	Region, Profile string
	Credentials     awssdk.CredentialsProvider
	// MaxAttempts bounds the retryer's attempts per call (default 8);
	// MaxBackoff one retry's backoff (default 5s).
	MaxAttempts int
	MaxBackoff  time.Duration
}

// Load returns the configuration, or an error naming what is missing. who
// names the caller in errors ("aws backend", "ec2").
func Load(ctx context.Context, who string, opts Options) (awssdk.Config, error) {
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	loadOpts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() awssdk.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = opts.MaxAttempts
				o.MaxBackoff = opts.MaxBackoff
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if opts.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(opts.Region))
	}
	if opts.Profile != "" {
		loadOpts = append(loadOpts, config.WithSharedConfigProfile(opts.Profile))
	}
	if opts.Credentials != nil {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(opts.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return awssdk.Config{}, fmt.Errorf("%s: load the AWS configuration: %w", who, err)
	}
	if cfg.Region == "" {
		return awssdk.Config{}, errors.New(who + ": no AWS region configured; set AWS_REGION, or region in the rpd block's backend \"aws\"")
	}
	return cfg, nil
}
