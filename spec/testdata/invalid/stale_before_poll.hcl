vm_ceiling "v" {
  max           = 10
  poll_interval = "5s"
  stale_after   = "1s" # ERROR: stale_after shorter than poll_interval
}

vm_ceiling "w" {
  max           = 10
  poll_interval = "1m" # ERROR: stale_after shorter than poll_interval
}
