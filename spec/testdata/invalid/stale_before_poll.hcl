vm_ceiling "v" {
  max           = 10
  poll_interval = "5s"
  stale_after   = "1s" # ERROR: stale_after shorter than poll_interval
}

vm_ceiling "w" {
  max           = 10
  poll_interval = "1m" # ERROR: stale_after shorter than poll_interval
}

vm_ceiling "x" {
  max         = 10
  stale_after = "1m"
  claim_ttl   = "1m" # ERROR: claim_ttl not longer than stale_after
}

vm_ceiling "y" {
  max         = 10
  stale_after = "3m" # ERROR: claim_ttl not longer than stale_after
}
