# A class whose warm runners rpd keeps on EC2 itself (docs/fleet.md): the
# leader launches them with CreateFleet under the vm_ceiling, and terminates
# idle runners above the desired count or past max_idle_age, VMs that never
# offered themselves and instances tagged with the stack that rpd does not
# know. The EC2 client comes from the AWS SDK's configuration chain
# (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_EC2, an instance role, ...),
# whichever state backend the stack uses.
#
#   rpd validate examples/fleet.hcl
#   rpd watch examples/     # with a launch template named ci-runner in the account

rpd {
  stack = "ci-fleet"
}

vm_ceiling "aws" {
  max           = 400
  poll_interval = "5s"
  usage "ec2" {
    unit = "vms" # or "vcpus", AWS's quota unit
  }
}

runner_class "large" {
  cpu            = 4
  mem            = "8GiB"
  instance_types = ["c6i.xlarge", "c7i.xlarge"]

  fleet {
    launch_template = "ci-runner" # its user data offers the runner: POST /v1/classes/large/instances
    usage_class     = "spot"
    fallback        = "on-demand"
    vm_ceiling      = "aws"
    subnets         = ["subnet-0a1b2c3d", "subnet-4e5f6a7b"]
    min_idle        = 2
    max_idle_age    = "30m"
    boot_timeout    = "5m"
    orphan_grace    = "10m"
    interval        = "15s"

    schedule "weekdays" {
      cron     = "0 8 * * MON-FRI"
      duration = "10h"
      timezone = "Europe/Berlin"
      min_idle = 12
    }
  }
}

pool "database_pool" {
  slots       = 3
  description = "at most 3 integration suites against the shared database at once"
}
