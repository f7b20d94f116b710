package ledger

import (
	"flag"
	"os"
	"testing"
)

// TestMain raises rapid's default number of checks: the property test needs
// a few thousand action sequences to reach the interleavings (a confirmation
// between a figure being taken and delivered) that matter. An explicit
// -rapid.checks wins.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	if !explicit {
		if err := flag.Set("rapid.checks", "3000"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
