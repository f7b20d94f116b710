package backend_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The contracts are a leaf, so that a backend links neither the
// configuration language nor the planner: reconcile imports backend, never
// the other way round.
func TestBackendsLinkNoLanguageOrPlanner(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	forbidden := []string{
		"github.com/hashicorp/hcl/",
		"github.com/rpdhq/rpd/spec",
		"github.com/rpdhq/rpd/reconcile",
		"github.com/rpdhq/rpd/daemon",
	}
	for _, pkg := range []string{".", "./local", "./aws"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f) && strings.HasSuffix(f, "/") {
					t.Errorf("%s depends on %s; backend contracts belong in package backend, which imports nothing of rpd", pkg, dep)
				}
			}
			if pkg == "." && strings.HasPrefix(dep, "github.com/rpdhq/") && dep != "github.com/rpdhq/rpd/backend" {
				t.Errorf("package backend depends on %s; it must stay a leaf", dep)
			}
		}
	}
}
