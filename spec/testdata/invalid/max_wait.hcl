# max_wait bounds a request's wait_seconds: a duration of at least 0.
pool "a" {
  slots    = 1
  max_wait = "-5s" # ERROR: Invalid duration
}

pool "b" {
  slots    = 1
  max_wait = 30 # ERROR: Incorrect attribute value type
}
