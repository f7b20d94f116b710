// Command rpd is the command-line interface of rpd, the Terraform-style
// reconciler for CI capacity: it validates and formats configurations
// (validate, fmt) and, through commands other packages provide, plans,
// applies and serves them.
//
// It is not a library: everything here is unexported. Start reading at
// main.go, whose command table lists every subcommand; each lives in its own
// file (validate.go, fmt.go, version.go, help.go). vars.go holds the flags
// and the loading helper shared by every command that reads a
// configuration (-var, -var-file, -no-color, DIR-or-FILE argument,
// Terraform-style diagnostics).
//
// Exit codes follow Terraform: 0 success, 1 error, 3 for "fmt -check" found
// unformatted files.
package main
