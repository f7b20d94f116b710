pool "p" {
  slots     = 1
  lease_ttl = "10 minutes" # ERROR: Invalid duration
}

vm_ceiling "v" {
  max       = 1
  claim_ttl = 30 # ERROR: Incorrect attribute value type
}
