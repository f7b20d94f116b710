package daemon

import (
	"path/filepath"
	"testing"
)

// A daemon started on a configuration that is already applied (rpd apply,
// then rpd watch) has nothing to apply, and still reports the state's
// version, not 0.
func TestStateVersionOfAnAlreadyAppliedConfiguration(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "rpd.hcl"), rpdBlock(state))
	writeFile(t, filepath.Join(dir, "main.hcl"), "pool \"db\" {\n  slots = 2\n}\n")
	first := startDaemonIn(t, dir, state)
	want := first.d.Status().StateVersion
	if want < 1 {
		t.Fatalf("the first daemon applied, but reports state version %d", want)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	second := startDaemonIn(t, dir, state)
	if got := second.d.Status().StateVersion; got != want {
		t.Fatalf("state version after a restart on the applied configuration = %d, want %d", got, want)
	}
	st, err := second.c.Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.StateVersion != want {
		t.Fatalf("/v1/status state_version = %d, want %d", st.StateVersion, want)
	}
}
