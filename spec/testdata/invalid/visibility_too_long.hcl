runner_class "c" {
  cpu = 1
  mem = "1GiB"
  queue {
    visibility_timeout = "13h" # ERROR: Invalid value for "visibility_timeout"
  }
}
