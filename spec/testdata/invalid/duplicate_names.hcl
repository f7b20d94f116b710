pool "a" {
  slots = 1
}

pool "a" { # ERROR: Duplicate pool "a"
  slots = 2
}

priority "p" { weight = 1 }
priority "p" { weight = 2 } # ERROR: Duplicate priority "p"
