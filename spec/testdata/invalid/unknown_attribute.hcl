pool "p" { # ERROR: Missing required argument
  slotz = 3 # ERROR: Unsupported argument
}
