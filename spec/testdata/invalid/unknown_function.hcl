runner_class "c" {
  cpu = 1
  mem = size_of("4GiB") # ERROR: Call to unknown function
}
