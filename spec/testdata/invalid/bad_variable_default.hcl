variable "n" {
  type    = number
  default = "many" # ERROR: Invalid default value for variable
}

variable "m" {
  default = var.n # ERROR: Variables not allowed
}

variable "9lives" { # ERROR: Invalid variable name
}
