package watch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// startWatcher runs a Watcher of path with test timings and returns the
// channel its triggers arrive on.
func startWatcher(t *testing.T, path string, opts Options) <-chan Reason {
	t.Helper()
	if opts.Debounce == 0 {
		opts.Debounce = 20 * time.Millisecond
	}
	if opts.MaxDelay == 0 {
		opts.MaxDelay = 200 * time.Millisecond
	}
	if opts.Resync == 0 {
		opts.Resync = -1
	}
	ch := make(chan Reason, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := New(path, opts)
	go func() {
		defer close(done)
		_ = w.Run(ctx, func(r Reason) { ch <- r })
	}()
	t.Cleanup(func() { cancel(); <-done })
	// Run triggers once when its watches are in place.
	select {
	case <-ch:
	case <-time.After(3 * time.Second):
		t.Fatal("no initial trigger within 3s")
	}
	return ch
}

func expectTrigger(t *testing.T, ch <-chan Reason, what string) Reason {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(3 * time.Second):
		t.Fatalf("%s: no trigger within 3s", what)
		return ""
	}
}

func expectQuiet(t *testing.T, ch <-chan Reason, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: unexpected trigger %q", what, r)
	case <-time.After(600 * time.Millisecond):
	}
}

func drain(ch <-chan Reason) {
	for {
		select {
		case <-ch:
		case <-time.After(150 * time.Millisecond):
			return
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWatcherSeesWritesAndIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.hcl"), "pool \"p\" { slots = 1 }\n")
	ch := startWatcher(t, dir, Options{})

	write(t, filepath.Join(dir, "a.hcl"), "pool \"p\" { slots = 2 }\n")
	if got := expectTrigger(t, ch, "write"); got != ReasonChange {
		t.Fatalf("got reason %q, want %q", got, ReasonChange)
	}
	drain(ch)

	for _, name := range []string{".a.hcl.swp", "a.hcl~", "#a.hcl#", "a.hcl.tmp", "4913", "notes.txt", ".hidden.hcl"} {
		write(t, filepath.Join(dir, name), "x")
	}
	if err := os.MkdirAll(filepath.Join(dir, ".rpd"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, ".rpd", "state.db"), "rpd's own write")
	expectQuiet(t, ch, "temp files and rpd's own writes")
}

func TestWatcherDebouncesBursts(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.hcl")
	write(t, f, "1")
	ch := startWatcher(t, dir, Options{Debounce: 400 * time.Millisecond, MaxDelay: 2 * time.Second})
	for i := range 10 {
		write(t, f, string(rune('a'+i)))
		time.Sleep(5 * time.Millisecond)
	}
	expectTrigger(t, ch, "burst")
	expectQuiet(t, ch, "after one burst")
}

func TestWatcherMaxDelayBoundsAContinuousBurst(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.hcl")
	write(t, f, "1")
	ch := startWatcher(t, dir, Options{Debounce: 100 * time.Millisecond, MaxDelay: 150 * time.Millisecond})
	start := time.Now()
	stop := time.After(1 * time.Second)
	got := 0
loop:
	for i := 0; i < 200; i++ { // writes every 20 ms, never quiet for 100 ms
		select {
		case <-stop:
			break loop
		case <-ch:
			got++
		case <-time.After(20 * time.Millisecond):
			write(t, f, time.Now().String())
		}
	}
	if got < 2 {
		t.Fatalf("a continuous 1 s burst triggered %d times in %v, want at least 2 (max delay 150ms)", got, time.Since(start))
	}
}

func TestWatcherAtomicReplace(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.hcl")
	write(t, f, "1")
	ch := startWatcher(t, dir, Options{})
	tmp := filepath.Join(dir, ".a.hcl.tmp123")
	write(t, tmp, "2")
	if err := os.Rename(tmp, f); err != nil {
		t.Fatal(err)
	}
	expectTrigger(t, ch, "rename over a.hcl")
}

func TestWatcherDeleteAndRecreateDirectory(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "conf")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "a.hcl"), "1")
	ch := startWatcher(t, dir, Options{})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	expectTrigger(t, ch, "directory removed")
	drain(ch)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	expectTrigger(t, ch, "directory re-created")
	drain(ch)
	// The new directory is watched: a write inside it is seen.
	write(t, filepath.Join(dir, "a.hcl"), "2")
	expectTrigger(t, ch, "write in the re-created directory")
}

func TestWatcherKubernetesSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	mkGen := func(name, content string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, name, "a.hcl"), content)
	}
	mkGen("..gen1", "1")
	if err := os.Symlink("..gen1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/a.hcl", filepath.Join(dir, "a.hcl")); err != nil {
		t.Fatal(err)
	}
	s1, err := Take(dir)
	if err != nil {
		t.Fatal(err)
	}
	ch := startWatcher(t, dir, Options{})
	// The kubelet's swap: a new generation, a temp symlink, renamed over ..data.
	mkGen("..gen2", "2")
	if err := os.Symlink("..gen2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	expectTrigger(t, ch, "..data swap")
	s2, err := Take(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s1.Hash == s2.Hash {
		t.Fatal("the snapshot after the swap has the old hash")
	}
	if got := string(s2.Files[filepath.Join(dir, "a.hcl")]); got != "2" {
		t.Fatalf("a.hcl after the swap = %q, want %q", got, "2")
	}
}

func TestWatcherSingleFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "rpd.hcl")
	write(t, f, "1")
	ch := startWatcher(t, f, Options{})
	write(t, filepath.Join(dir, "other.hcl"), "x")
	expectQuiet(t, ch, "another file beside the watched one")
	write(t, f, "2")
	expectTrigger(t, ch, "the watched file")
}

func TestWatcherPollOnly(t *testing.T) {
	dir := t.TempDir()
	ch := startWatcher(t, dir, Options{PollOnly: true, Poll: 30 * time.Millisecond})
	if got := expectTrigger(t, ch, "poll"); got != ReasonPoll {
		t.Fatalf("got %q, want %q", got, ReasonPoll)
	}
}

func TestWatcherResync(t *testing.T) {
	dir := t.TempDir()
	ch := startWatcher(t, dir, Options{Resync: 50 * time.Millisecond})
	if got := expectTrigger(t, ch, "resync"); got != ReasonResync {
		t.Fatalf("got %q, want %q", got, ReasonResync)
	}
}

func TestWatcherMissingDirectoryAppears(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "later")
	ch := startWatcher(t, dir, Options{})
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	expectTrigger(t, ch, "directory created")
	drain(ch)
	write(t, filepath.Join(dir, "a.hcl"), "1")
	expectTrigger(t, ch, "file in the new directory")
}
