# Every block with only its required attributes: the golden file shows the
# defaults.
rpd {
  backend "aws" {}
}

runner_class "medium" {
  cpu = 2
  mem = 4294967296
}

budget "scanner" {}

vm_ceiling "vms" {
  max = 10

  usage "http" {
    url = "https://usage.example.com/v1/vms"
  }
}

pool "default_pool" {}

pool "p" {
  slots = 1
}

priority "zero" {
  weight = 0
}
