budget "b" {
  scan_ring   = 0 # ERROR: Invalid value for "scan_ring"
  delta_cache = "0MiB" # ERROR: Invalid value for "delta_cache"
  spill_slots = 0 # ERROR: Invalid value for "spill_slots"
}

budget "c" {
  scan_ring   = -5 # ERROR: Invalid size
  spill_slots = "many" # ERROR: Incorrect attribute value type
}

budget "huge_spill" {
  spill_slots = 20000 # ERROR: Invalid value for "spill_slots"
}

budget "huge_bytes" {
  scan_ring = 9300000000000000000 # ERROR: Invalid value for "scan_ring"
}
