pool "a" {
  slots = 2
}

pool "b" {
  slots = pool.a.slots # ERROR: Unknown reference
}
