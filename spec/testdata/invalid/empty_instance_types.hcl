runner_class "c" {
  cpu            = 1
  mem            = "1GiB"
  instance_types = [] # ERROR: Empty instance_types
}
