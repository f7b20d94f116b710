locals {
  a = local.b
  b = local.a # ERROR: Cycle in local values
}
