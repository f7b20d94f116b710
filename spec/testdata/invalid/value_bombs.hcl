# Short expressions whose values would grow without bound are refused.
locals {
  k   = join(",", range(1000))
  m   = "${local.k}${local.k}${local.k}${local.k}${local.k}${local.k}${local.k}${local.k}"
  m2  = "${local.m}${local.m}${local.m}${local.m}${local.m}${local.m}${local.m}${local.m}"
  m3  = "${local.m2}${local.m2}${local.m2}${local.m2}${local.m2}${local.m2}${local.m2}${local.m2}" # ERROR: Value too large
  rep = replace(local.m2, "", local.m2) # ERROR: Error in function call
  sep = join(local.m2, range(1000)) # ERROR: Error in function call
  ind = indent(1000, replace(local.m, ",", "\n")) # ERROR: Error in function call
  fl  = formatlist("%1000s", range(1000)) # ERROR: Error in function call
  tpl = "%{for i in range(1000)}${local.m}%{endfor}" # ERROR: Value too large
  ok  = replace(local.k, ",", ";")
  fe  = [for i in range(1000) : local.m2] # ERROR: Value too large
}

pool "p" {
  slots = length(split(";", local.ok))
}
