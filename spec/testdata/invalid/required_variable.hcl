variable "slots" { # ERROR: No value for required variable
  type = number
}

pool "p" {
  slots = var.slots
}
