runner_class "c" {
  cpu = 1
  mem = "1GiB"
  queue {}
  queue {} # ERROR: Duplicate queue block
}

rpd {
  backend "local" {}
  backend "aws" {} # ERROR: Duplicate backend block
}
