rpd {
  stack = "a-rather-long-stack-name-for-our-ci-xx"
}

runner_class "an-even-longer-class-name-that-overflows-sqs-limits" { # ERROR: Invalid queue name
  cpu = 1
  mem = "1GiB"
}
