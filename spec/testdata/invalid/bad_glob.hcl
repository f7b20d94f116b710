runner_class "c" {
  cpu            = 1
  mem            = "1GiB"
  instance_types = ["m6i.*", "c6i.[large"] # ERROR: Invalid glob pattern
}
