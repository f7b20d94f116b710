package fleet_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain keeps the property tests' default run short (each case
// simulates an hour of passes); -rapid.checks=N asks for more.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		_ = f.Value.Set("30")
	}
	os.Exit(m.Run())
}
