vm_ceiling "v" {
  max   = 10
  grant = "eventually" # ERROR: Unknown grant mode
}
