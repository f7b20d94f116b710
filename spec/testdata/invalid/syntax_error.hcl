pool "p" {
  slots = = 3 # ERROR: Invalid expression
}
