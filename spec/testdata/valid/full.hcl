# Every attribute set, with variables, locals and functions.
variable "env" {
  type    = string
  default = "dev"
}

variable "sizes" {
  type = map(string)
  default = {
    small = "1.5GiB"
    large = "16GB"
  }
}

variable "families" {
  type    = list(string)
  default = ["m6i", "m7i"]
}

locals {
  stack     = "ci-${upper(var.env)}"
  patterns  = formatlist("%s.*", var.families)
  slot_base = max(2, length(var.families))
}

rpd {
  stack  = local.stack
  listen = "0.0.0.0:7443"
  token  = "s3cret"
  audit_log = "/var/log/rpd/audit.jsonl"
  tls {
    cert_file      = "/etc/rpd/tls/tls.crt"
    key_file       = "/etc/rpd/tls/tls.key"
    client_ca_file = "/etc/rpd/tls/ca.crt"
    ca_file        = "/etc/rpd/tls/leader-ca.crt"
    client_scopes  = ["read", "work"]
  }

  backend "local" {
    path = "/var/lib/rpd/state.db"
  }

  ha {
    lease     = "10s"
    renew     = "2s"
    advertise = "http://rpd-0.rpd.ci.svc:7443/"
  }
}

runner_class "zeta" {
  cpu            = 16
  mem            = var.sizes.large
  instance_types = concat(local.patterns, ["c?i.metal", "r[5-7].*"])
  allow_destroy  = true

  queue {
    name               = "zeta_queue-${var.env}"
    visibility_timeout = "12h"
    retention          = "1d12h"
    delay              = "15m"
  }

  pickup {
    requeue_delay    = "0s"
    local_exhaustion = 1
    mode             = "delete"
    claim_ttl        = "2m"
  }
}

runner_class "alpha" {
  cpu            = 1
  mem            = var.sizes["small"]
  instance_types = ["c6i.large", "c7i.*", "m7i.large"]

  queue {
    retention = "60s"
  }

  fleet {
    launch_template = "ci-runner"
    version         = "7"
    usage_class     = "spot"
    fallback        = "none"
    vm_ceiling      = "aws"
    subnets         = ["subnet-0a", "subnet-0b"]
    min_idle        = 2
    max_idle_age    = "30m"
    boot_timeout    = "4m"
    orphan_grace    = "20m"
    interval        = "10s"
    max_launch      = 8

    schedule "weekdays" {
      cron     = "0 8 * * MON-FRI"
      duration = "10h"
      timezone = "Europe/Berlin"
      min_idle = 12
    }
    schedule "nightly" {
      cron     = "@daily"
      duration = "1h"
      min_idle = 4
    }
  }
}

budget "unlimited" {
  scan_ring   = "1KB"
  delta_cache = "2 MiB"
  spill_slots = "unlimited"
  max_queued  = 100
}

budget "bytes" {
  scan_ring   = 1024
  delta_cache = "1TiB"
  spill_slots = local.slot_base * 2
}

vm_ceiling "pushed" {
  max           = 5
  claim_ttl     = "90s"
  poll_interval = "250ms"
  stale_after   = "250ms"
  grant         = "immediate"
  max_queued    = 1000
}

vm_ceiling "aws" {
  max = 400
  usage "ec2" {
    unit = "vcpus"
    tags = { team = "ci", tier = 2 }
  }
}

pool "default_pool" {
  slots         = 64
  description   = "everything else"
  lease_ttl     = "0s"
  max_queued    = 0
  allow_destroy = false
}

pool "deploy" {
  slots         = 1
  lease_ttl     = "1h"
  max_queued    = 10
  allow_destroy = true
}

priority "low" { weight = -10 }
priority "high" { weight = 1000 }

token "ci-workers" {
  sha256 = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"
  scopes = ["work", "read"]
  pools  = ["database_pool"]
  rate_limit = 200
}

token "operator" {
  file   = "/run/secrets/rpd-operator"
  scopes = ["admin"]
}
