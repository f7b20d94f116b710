rpd {
  stack = var.nope # ERROR: Reference to undeclared input variable
}

locals {
  x = var.missing # ERROR: Reference to undeclared input variable
}
