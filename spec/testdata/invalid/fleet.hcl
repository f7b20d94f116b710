# A fleet block's own mistakes, and the rules that span objects.
vm_ceiling "aws" {
  max = 2
  usage "ec2" {
    unit = "cores" # ERROR: Unknown usage unit
  }
}

runner_class "globs" {
  cpu            = 2
  mem            = "4GiB"
  instance_types = ["c6i.*"]
  fleet { # ERROR: Fleet without a concrete instance type
    launch_template = "runner"
    vm_ceiling      = "aws"
  }
}

runner_class "medium" {
  cpu            = 2
  mem            = "4GiB"
  instance_types = ["c6i.large"]
  fleet {
    launch_template = "runner"
    version         = "latest"       # ERROR: Invalid launch template version
    usage_class     = "reserved"     # ERROR: Unknown usage_class
    vm_ceiling      = "nowhere"      # ERROR: Reference to undeclared vm_ceiling
    subnets         = ["sn-1"]       # ERROR: Invalid subnet
    min_idle        = -1             # ERROR: Invalid value for "min_idle"
    boot_timeout    = "0s"           # ERROR: Invalid value for "boot_timeout"
    schedule "day" {
      cron     = "0 25 * * *"        # ERROR: Invalid cron expression
      duration = "8h"
      timezone = "Mars/Olympus"      # ERROR: Unknown time zone
      min_idle = 3
    }
    schedule "day" { # ERROR: Duplicate schedule
      cron     = "0 8 * * *"
      duration = "1h"
      min_idle = 1
    }
  }
}

runner_class "big" {
  cpu            = 2
  mem            = "4GiB"
  instance_types = ["c6i.large"]
  fleet {
    launch_template = "runner"
    vm_ceiling      = "aws" # WARNING: min_idle above the ceiling
    min_idle        = 3
  }
}
