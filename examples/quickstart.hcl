# The smallest useful rpd configuration: one class of runners and one pool,
# with all live state in a local SQLite file.
#
#   rpd validate examples/quickstart.hcl

rpd {
  stack = "quickstart"

  backend "local" {
    path = ".rpd/state.db"
  }
}

# Idle runners with at least 2 vCPUs and 4 GiB wait in the queue
# "quickstart-rp-medium".
runner_class "medium" {
  cpu = 2
  mem = "4GiB"
}

# At most 3 jobs use the database at once.
pool "database_pool" {
  slots = 3
}
