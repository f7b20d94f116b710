rpd {
  audit_log = ""                   # ERROR: Invalid audit_log
  tls {
    cert_file     = "/etc/rpd/tls.crt"
    key_file      = "/etc/rpd/tls.key"
    client_scopes = ["work"]       # ERROR: client_scopes without client_ca_file
  }
}

token "short_hash" {
  sha256 = "abc123"                # ERROR: Invalid sha256
  scopes = ["work"]
}

token "both" {
  sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
  file   = "/run/secrets/rpd"      # ERROR: Both sha256 and file
  scopes = ["read"]
}

token "bad_scope" {
  file   = "/run/secrets/rpd"
  scopes = ["read", "root"]        # ERROR: Unknown scope
}

token "no_scope" {
  file   = "/run/secrets/rpd"
  scopes = []                      # ERROR: Empty scopes
}

token "limited" {
  file   = "/run/secrets/rpd"
  scopes = ["work"]
  pools  = ["bad name"]            # ERROR: Invalid name in pools
}

token "flood" {
  file       = "/run/secrets/rpd"
  scopes     = ["work"]
  rate_limit = 0                   # ERROR: Invalid value for "rate_limit"
}

token "dup_a" {
  sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
  scopes = ["read"]
}

token "dup_b" {                    # ERROR: Duplicate token secret
  sha256 = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"
  scopes = ["read"]
}
