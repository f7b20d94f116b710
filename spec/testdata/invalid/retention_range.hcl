runner_class "short" {
  cpu = 1
  mem = "1GiB"
  queue {
    retention = "30s" # ERROR: Invalid value for "retention"
  }
}

runner_class "long" {
  cpu = 1
  mem = "1GiB"
  queue {
    retention = "15d" # ERROR: Invalid value for "retention"
  }
}
