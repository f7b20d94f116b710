vm_ceiling "v" {
  max = 10
  usage "prometheus" { # ERROR: Unknown usage source type
    url = "http://127.0.0.1:9090"
  }
}

vm_ceiling "w" {
  max = 10
  usage "http" {
    url     = "ftp://127.0.0.1/usage" # ERROR: Invalid usage URL
    field   = "data..active" # ERROR: Invalid usage field
    timeout = "0s" # ERROR: Invalid value for "timeout"
  }
}
