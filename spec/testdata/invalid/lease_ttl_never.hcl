# A remote lease that never expires would be held forever by a vanished
# worker: "never" and negative durations are refused with that reason.
pool "a" {
  slots     = 1
  lease_ttl = "never" # ERROR: Invalid value for "lease_ttl"
}

pool "b" {
  slots     = 1
  lease_ttl = "-5m" # ERROR: Invalid value for "lease_ttl"
}

pool "c" {
  slots     = 1
  lease_ttl = "500ms" # ERROR: Invalid value for "lease_ttl"
}
