pool "p" {
  slots = -1 # ERROR: Invalid value for "slots"
}
