runners "x" { # ERROR: Unsupported block type
  cpu = 1
}
