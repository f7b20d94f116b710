locals {
  wide   = format("%900000000s", "") # ERROR: Error in function call
  deep   = indent(900000000, "a\nb") # ERROR: Error in function call
  nested = [for a in range(1024) : [for b in range(1024) : a * b]] # ERROR: Nested for expression
  fine   = formatlist("%-10s|%5.2f", ["a", "b"], [1, 2])
  flat   = [for a in range(3) : a * 2]
}

pool "p" {
  slots = length(local.flat) + length(local.fine)
}

variable "v" {
  default = [for a in [1] : [for b in [2] : b]] # ERROR: Nested for expression
}

variable "w" {
  default = 1
  validation {
    condition     = length([for a in [1] : [for b in [2] : b]]) > 0 # ERROR: Nested for expression
    error_message = "never"
  }
}
