pool "p" {
  slots = 0 # ERROR: Invalid value for "slots"
}

pool "default_pool" {
  slots = 2.5 # ERROR: Invalid value for "slots"
}
