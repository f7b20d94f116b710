rpd {
  stack = "a"
}

rpd { # ERROR: Duplicate rpd block
  stack = "b"
}
