vm_ceiling "v" {
  max = 0 # ERROR: Invalid value for "max"
}
