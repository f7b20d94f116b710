rpd {
  ha {
    lease     = "1s"               # ERROR: Invalid value for "lease"
    renew     = "3s"               # ERROR: Invalid value for "renew"
    advertise = "10.0.0.5:7070"    # ERROR: Invalid advertise URL
  }
}
