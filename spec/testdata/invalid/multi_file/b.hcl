pool "shared" { # ERROR: Duplicate pool "shared"
  slots = 2
}

variable "env" { # ERROR: Duplicate variable "env"
  default = "prod"
}

rpd {
  stack = "${var.env}-x"
}
