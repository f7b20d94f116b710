# A CI fleet: three classes of runners, a memory budget for repository
# scanners, a ceiling on browser-test VMs that a provider counts for us,
# several pools and named priorities.
#
#   rpd validate examples/ci-fleet.hcl
#   rpd validate -var env=prod -var vm_max=200 examples/ci-fleet.hcl
#   RPD_VAR_env=staging rpd validate examples/ci-fleet.hcl

variable "env" {
  type        = string
  default     = "dev"
  description = "Deployment environment; part of the stack and queue names."

  validation {
    condition     = contains(["dev", "staging", "prod"], var.env)
    error_message = "env must be one of dev, staging or prod."
  }
}

variable "vm_max" {
  type        = number
  default     = 100
  description = "How many browser VMs the provider lets us run at once."
}

variable "usage_url" {
  type    = string
  default = "http://127.0.0.1:9000/usage"
}

locals {
  stack  = "ci-${var.env}"
  prefix = "${local.stack}-runners"

  # Instance families every class accepts.
  general = ["m6i.*", "m7i.*"]
}

rpd {
  stack  = local.stack
  listen = "127.0.0.1:7070"

  backend "local" {
    path = ".rpd/state.db"
  }
}

runner_class "small" {
  cpu            = 1
  mem            = "2GiB"
  instance_types = concat(["t3.small", "t3.medium"], local.general)

  queue {
    name               = "${local.prefix}-small"
    visibility_timeout = "30s"
    retention          = "1d"
  }

  pickup {
    mode = "delete" # the seed's literal loop: delete on receive, re-send to requeue
  }
}

runner_class "medium" {
  cpu            = 2
  mem            = "4GiB"
  instance_types = concat(["c6i.large"], local.general)

  queue {
    name               = "${local.prefix}-medium"
    visibility_timeout = "30s"
    retention          = "4d"
  }

  pickup {
    requeue_delay    = "3s"
    local_exhaustion = 5
    mode             = "lease"
    claim_ttl        = "2m" # a claim the worker does not confirm within 2m is offered again
  }
}

runner_class "large" {
  cpu            = 8
  mem            = "32GiB"
  instance_types = ["c6i.2xlarge", "c6i.4xlarge", "m6i.[24]xlarge"]

  queue {
    name               = "${local.prefix}-large"
    visibility_timeout = "2m"
    retention          = "14d"
    delay              = "0s"
  }
}

# Repository and archive scanners share one memory budget (seed 002).
budget "scanner" {
  scan_ring   = "256MiB"
  delta_cache = "512MiB"
  spill_slots = 16
}

# Never run more browser VMs than the provider allows (seed 003).
vm_ceiling "browser-vms" {
  max           = var.vm_max
  claim_ttl     = "2m"
  poll_interval = "5s"
  stale_after   = "30s"
  grant         = "next_usage"

  usage "http" {
    url     = var.usage_url
    field   = "active"
    timeout = "2s"
  }
}

pool "default_pool" {
  slots = 16
}

pool "database_pool" {
  slots       = 3
  description = "at most 3 concurrent heavy queries"
  lease_ttl   = "10m"
}

pool "deploy_pool" {
  slots       = 1
  description = "one deployment at a time"
  lease_ttl   = "30m"
  max_queued  = 20
}

priority "critical" { weight = 100 }
priority "normal" { weight = 10 }
priority "batch" { weight = 1 }
