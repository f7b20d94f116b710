package awstest

import (
	"os/exec"
	"strings"
	"testing"
)

// start reports the port the child prints, and otherwise an error carrying
// the child's output: it never guesses a port.
func TestStartReadsThePortOrReportsWhy(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	for _, tc := range []struct {
		name, script, want string
	}{
		{"listens", `console.log("some banner"); console.log("` + portLine + `4567"); setInterval(() => {}, 1000)`, "http://127.0.0.1:4567"},
		{"exits", `console.error("boom: cannot bind"); process.exit(3)`, "exited before listening: boom: cannot bind"},
		{"bad port", `console.log("` + portLine + `70000"); setInterval(() => {}, 1000)`, `reported port "70000", not a port number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _, err := start(t, "fake-emulator", []string{node, "-e", tc.script})
			got := url
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("start = %q, %v; want %q", url, err, tc.want)
			}
		})
	}
}
