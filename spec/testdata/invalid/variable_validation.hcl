variable "env" { # ERROR: Invalid value for variable
  default = "qa"
  validation {
    condition     = contains(["dev", "prod"], var.env)
    error_message = "env must be dev or prod."
  }
}

variable "other" {
  default = 1
  validation {
    condition     = var.env == "dev" # ERROR: Invalid reference in variable validation
    error_message = "no."
  }
}
