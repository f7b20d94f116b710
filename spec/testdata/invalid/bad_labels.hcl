pool "a b" { # ERROR: Invalid pool name
  slots = 1
}

pool { # ERROR: Missing name for pool
  slots = 1
}

budget "x" "y" { # ERROR: Extraneous label for budget
}
