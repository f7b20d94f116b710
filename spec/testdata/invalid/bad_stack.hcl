rpd {
  stack  = "ci prod" # ERROR: Invalid stack name
  listen = "localhost" # ERROR: Invalid listen address
}
