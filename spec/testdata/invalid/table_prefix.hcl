rpd {
  backend "aws" {
    table_prefix = "rpd/prod" # ERROR: Invalid table_prefix
  }
}
