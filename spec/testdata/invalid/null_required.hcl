pool "p" {
  slots = null # ERROR: Missing required argument
}
