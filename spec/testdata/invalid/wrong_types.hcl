runner_class "c" {
  cpu           = "two" # ERROR: Incorrect attribute value type
  mem           = ["4GiB"] # ERROR: Incorrect attribute value type
  allow_destroy = "sometimes" # ERROR: Incorrect attribute value type
}

pool "p" {
  slots       = 1
  description = ["a", "b"] # ERROR: Incorrect attribute value type
}
