runner_class "c" { # ERROR: Missing required argument
  mem = "1GiB"
}

vm_ceiling "v" { # ERROR: Missing required argument
}

priority "p" { # ERROR: Missing required argument
}
