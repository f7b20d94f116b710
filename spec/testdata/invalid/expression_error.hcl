locals {
  s = "a" + 1 # ERROR: Invalid operand
  u = upper(3, 4) # ERROR: Too many function arguments
  n = 1 / 0
}

pool "p" {
  slots = local.n # ERROR: Invalid value for "slots"
}

pool "q" {
  slots = "three" # ERROR: Incorrect attribute value type
}
