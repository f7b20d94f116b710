// Package tlstest makes a throw-away certificate authority and the
// certificates the TLS tests of the daemon and the CLI need: a server
// certificate for 127.0.0.1 and localhost, client certificates for mutual
// TLS, and a new server certificate to rotate to. Everything is written as
// PEM files into a test's temporary directory.
//
// Not for: production code (tests import it; nothing here is safe to
// deploy: keys are ECDSA P-256 made per test, valid for one day).
//
// Start reading at New.
package tlstest
