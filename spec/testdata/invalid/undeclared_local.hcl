pool "p" {
  slots = local.count # ERROR: Reference to undeclared local value
}
