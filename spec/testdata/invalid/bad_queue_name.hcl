runner_class "c" {
  cpu = 1
  mem = "1GiB"
  queue {
    name = "runners.fifo" # ERROR: Invalid queue name
  }
}
