// Package awstest starts the AWS wire-protocol emulators rpd's aws backend is
// tested against — local-aws-sqs@2.0.2 (SQS, JSON protocol) and
// dynalite@4.0.0 (DynamoDB) from test/emulators/node_modules — on free
// 127.0.0.1 ports, and stops them when the test ends.
//
// When node or the emulators are missing, Start skips the test, saying how
// to install them; when the environment variable CI is set it fails instead,
// so CI never silently skips the aws tests.
//
// Start reading at Start. It is for tests only; nothing here talks to real AWS.
package awstest
