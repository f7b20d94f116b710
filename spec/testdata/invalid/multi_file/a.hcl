pool "shared" {
  slots = 1
}

variable "env" {
  default = "dev"
}
