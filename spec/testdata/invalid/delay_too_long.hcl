runner_class "c" {
  cpu = 1
  mem = "1GiB"
  queue {
    delay = "16m" # ERROR: Invalid value for "delay"
  }
  pickup {
    requeue_delay = "1h" # ERROR: Invalid value for "requeue_delay"
    claim_ttl     = "25h" # ERROR: Invalid value for "claim_ttl"
  }
}
