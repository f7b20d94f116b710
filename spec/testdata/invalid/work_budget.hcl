# Each function call is charged the size of its arguments and result; a
# load may spend 1 Mi units in total, which bounds the time a for
# expression can take.
locals {
  work = [for a in range(1024) : join(",", range(1024))] # ERROR: Error in function call
}
