runner_class "c" {
  cpu = 1
  mem = "1GiB"
  queue {
    visibility_timeout = "1500ms" # ERROR: Invalid value for "visibility_timeout"
  }
}
