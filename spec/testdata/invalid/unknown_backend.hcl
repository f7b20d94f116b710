rpd {
  backend "gcs" { # ERROR: Unknown backend type
    bucket = "x"
  }
}
