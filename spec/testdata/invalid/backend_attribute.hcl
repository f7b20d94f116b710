rpd {
  backend "local" {
    region = "us-east-1" # ERROR: Unsupported argument
    realtime_sync = "sometimes" # ERROR: Incorrect attribute value type
  }
}
