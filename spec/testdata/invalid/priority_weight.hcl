priority "p" {
  weight = 1.5 # ERROR: Invalid value for "weight"
}

priority "q" {
  weight = 1e12 # ERROR: Invalid value for "weight"
}
