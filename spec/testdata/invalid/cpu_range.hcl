runner_class "c" {
  cpu = 0 # ERROR: Invalid value for "cpu"
  mem = 0 # ERROR: Invalid value for "mem"
}
