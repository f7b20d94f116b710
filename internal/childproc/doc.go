// Package childproc holds the process attributes test helpers start
// emulators with (node's SQS and DynamoDB emulators, moto's EC2): in a
// process group of their own, and on Linux killed when the test binary
// dies first.
package childproc
