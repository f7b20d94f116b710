package awstest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/internal/awstest"
)

const childEnv = "RPD_AWSTEST_MISSING_CHILD"

// TestMissingNode re-executes this test binary with an empty PATH (so node
// cannot be found): without CI the emulator test skips, saying what to
// install; with CI set it fails with the same instruction.
func TestMissingNode(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		awstest.Start(t)
		t.Log("emulators started although node should be missing")
		return
	}
	for _, tc := range []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{"", false, "--- SKIP: TestMissingNode"},
		{"true", true, "CI is set"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMissingNode$", "-test.v", "-test.count=1")
		env := []string{childEnv + "=1", "PATH=/nonexistent"}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "CI=") {
				env = append(env, kv)
			}
		}
		if tc.ci != "" {
			env = append(env, "CI="+tc.ci)
		}
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		cancel()
		if (err != nil) != tc.wantFail {
			t.Errorf("CI=%q: child exit error %v; want failure %v\n%s", tc.ci, err, tc.wantFail, out)
		}
		if s := string(out); !strings.Contains(s, tc.want) || !strings.Contains(s, "npm ci") {
			t.Errorf("CI=%q: output does not contain %q and the `npm ci` instruction:\n%s", tc.ci, tc.want, s)
		}
	}
}
