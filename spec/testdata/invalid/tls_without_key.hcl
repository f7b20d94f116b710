rpd {
  tls {                            # ERROR: Missing required argument
    cert_file = "/etc/rpd/tls.crt"
  }
}
