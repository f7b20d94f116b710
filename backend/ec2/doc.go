// Package ec2 is the stack's EC2, seen through what the fleet reconciler
// and the VM ceilings need: it launches a runner class's VMs with
// CreateFleet (type instant, the class's launch template with its instance
// types × subnets as overrides, spot or on-demand, tagged rpd:stack,
// rpd:class and rpd:launch, with an idempotency token), lists the stack's
// instances by tag, terminates them, and counts them (VMs or vCPUs) as a
// vm_ceiling's usage "ec2" figure.
//
// Client implements fleet.Cloud (runtime/fleet) and UsageSource
// ledger.UsageSource (runtime/ledger); both interfaces are declared by the
// packages that use them. The configuration comes from the AWS SDK's
// standard chain, as the aws backend's does: region, profile, credentials,
// and the endpoint from AWS_ENDPOINT_URL_EC2. Throttling is retried by the
// SDK's retryer with exponential backoff.
//
// Not for: deciding what to launch or terminate (runtime/fleet), or the
// runners' inventory (the state backends). Its tests run against
// moto_server's EC2 (internal/ec2test), spot errors and throttling through
// a fault-injecting proxy in front of it.
//
// Start reading at Open and Client.Launch (ec2.go).
package ec2
