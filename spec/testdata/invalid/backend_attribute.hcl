rpd {
  backend "local" {
    region = "us-east-1" # ERROR: Unsupported argument
  }
}
