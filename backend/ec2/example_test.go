package ec2_test

import (
	"context"
	"fmt"
	"log"

	"github.com/rpdhq/rpd/backend/ec2"
	"github.com/rpdhq/rpd/runtime/fleet"
)

// The fleet reconciler's EC2 side: a client for one stack, from the AWS
// SDK's configuration chain (AWS_ENDPOINT_URL_EC2 points it at moto_server
// in the tests), launching two spot runners of a class with one
// CreateFleet call whose client token comes from the recorded launch
// intent. (Not run: it calls EC2.)
func Example() {
	ctx := context.Background()
	c, err := ec2.Open(ctx, ec2.Options{Stack: "ci-prod", Region: "eu-central-1"})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Launch(ctx, fleet.LaunchRequest{
		Class: "medium", LaunchID: "l-42", ClientToken: "rpd-ci-prod-l-42", Lifecycle: fleet.Spot, Count: 2,
		Spec: fleet.LaunchSpec{Template: "ci-runner", InstanceTypes: []string{"c6i.large", "c7i.large"},
			Subnets: []string{"subnet-0a", "subnet-0b"}, UsageClass: fleet.Spot, Fallback: fleet.OnDemand},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, in := range res.Instances {
		fmt.Println("launched", in.ID)
	}
	for _, e := range res.Errors {
		fmt.Println("not launched:", e.Code, e.Message)
	}
}
