runner_class "c" {
  cpu = 1
  mem = "1GiB"
  pickup {
    mode             = "peek" # ERROR: Unknown pickup mode
    local_exhaustion = 0 # ERROR: Invalid value for "local_exhaustion"
  }
}
