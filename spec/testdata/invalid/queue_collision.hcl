runner_class "a" {
  cpu = 1
  mem = "1GiB"
  queue {
    name = "shared"
  }
}

runner_class "b" {
  cpu = 1
  mem = "1GiB"
  queue {
    name = "shared" # ERROR: Duplicate queue name
  }
}

runner_class "c" {
  cpu = 1
  mem = "1GiB"
  queue {
    name = "default-rp-d"
  }
}

runner_class "d" { # ERROR: Duplicate queue name
  cpu = 1
  mem = "1GiB"
}
