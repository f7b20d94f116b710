budget "b" {
  scan_ring   = "lots" # ERROR: Invalid size
  delta_cache = "4gb" # ERROR: Invalid size
}
