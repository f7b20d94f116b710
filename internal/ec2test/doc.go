// Package ec2test starts moto_server (the EC2 emulator this machine image's
// Python ships) on a free 127.0.0.1 port for a test, and puts a
// fault-injecting HTTP proxy in front of it (Proxy): throttling, calls EC2
// refuses, spot capacity errors rewritten into CreateFleet's answer, and
// slow calls. moto_server is found on PATH or as python3's moto.server
// module; when it is missing, Start skips the test, or fails it when the
// environment variable CI is set.
//
// Start reading at Start. It is for tests only; nothing here talks to
// real AWS.
package ec2test
