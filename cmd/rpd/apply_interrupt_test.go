package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestE2ECtrlCDuringApply signals the real binary in the middle of an
// apply, once (graceful: the changes in flight finish, nothing new starts)
// and twice in quick succession (the changes in flight are aborted, if any
// are left). Either way apply ends promptly with exit 1, releases the
// lock, and running it again converges.
func TestE2ECtrlCDuringApply(t *testing.T) {
	for _, signals := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d interrupts", signals), func(t *testing.T) {
			be := localE2E()
			stack := uniqueStack()
			w := newWorkdir(t, be.env...)
			const classes = 3000 // far more than can be created before the signal lands
			var body strings.Builder
			for i := range classes {
				fmt.Fprintf(&body, "runner_class \"c%04d\" {\n  cpu = 1\n  mem = \"1GiB\"\n}\n", i)
			}
			w.write("main.hcl", be.header(stack)+body.String())

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c, _, stderr := w.cmd(ctx, "apply", "-auto-approve", "-no-color", "-parallelism", "1")
			pr, pw := io.Pipe()
			c.Stdout = pw
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{})
			var (
				mu      sync.Mutex
				stdout  strings.Builder
				created int
			)
			scanned := make(chan struct{})
			go func() {
				defer close(scanned)
				var once sync.Once
				sc := bufio.NewScanner(pr)
				for sc.Scan() {
					line := sc.Text()
					mu.Lock()
					stdout.WriteString(line + "\n")
					if strings.Contains(line, ": Creation complete after") {
						created++
					}
					mu.Unlock()
					if strings.Contains(line, ": Creating...") {
						once.Do(func() { close(started) })
					}
				}
			}()
			select {
			case <-started:
			case <-time.After(time.Minute):
				t.Fatal("apply never started creating")
			}
			for i := range signals {
				if i > 0 {
					time.Sleep(20 * time.Millisecond)
				}
				if err := c.Process.Signal(os.Interrupt); err != nil {
					t.Fatal(err)
				}
			}
			sent := time.Now()
			err := c.Wait()
			pw.Close()
			<-scanned
			mu.Lock()
			out := stdout.String()
			n := created
			mu.Unlock()
			if c.ProcessState.ExitCode() != 1 {
				t.Fatalf("exit %v after Ctrl-C, want 1\n--- stdout (tail)\n%s\n--- stderr\n%s", err, tail(out, 20), stderr)
			}
			if d := time.Since(sent); d > 20*time.Second {
				t.Errorf("apply took %s to stop after Ctrl-C", d)
			}
			if !strings.Contains(stderr.String(), "Interrupt received. rpd is finishing the changes in progress, then stops cleanly") {
				t.Errorf("stderr lacks the interrupt notice:\n%s", stderr)
			}
			if signals == 2 && !strings.Contains(stderr.String(), "Two interrupts received. Exiting at once") {
				// The graceful stop finished before the second signal
				// landed (a local create takes microseconds); the abort
				// itself is covered in-process by TestInterruptible.
				t.Logf("apply had stopped before the second interrupt")
			}
			if !strings.Contains(out, "Apply incomplete!") || !strings.Contains(out, " skipped.") {
				t.Errorf("stdout lacks the outcome table:\n%s", tail(out, 20))
			}
			if signals == 1 && !strings.Contains(out, " 0 failed, ") {
				t.Errorf("a graceful stop failed a change in flight:\n%s", tail(out, 20))
			}
			if n >= classes {
				t.Fatalf("all %d queues were created despite the interrupt", n)
			}

			// The lock was released (no -lock-timeout: a held lock fails at
			// once) and a second apply finishes the job.
			r := w.must(0, "apply", "-auto-approve", "-no-color")
			if !strings.Contains(r.stdout, "Apply complete!") {
				t.Fatalf("re-run: %s", r)
			}
			w.must(0, "plan", "-detailed-exitcode", "-no-color")
			queues, err := be.open(t, w, stack).ListQueues(context.Background(), stack+"-rp-")
			if err != nil {
				t.Fatal(err)
			}
			if len(queues) != classes {
				t.Fatalf("%d queues after the re-run, want %d", len(queues), classes)
			}
		})
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestReadAnswer: Ctrl-C at apply's or force-unlock's question ends the
// wait at once; answers are read trimmed, with or without a newline.
func TestReadAnswer(t *testing.T) {
	for in, want := range map[string]string{"yes\n": "yes", "  yes \r\n": "yes", "no\n": "no", "yes": "yes"} {
		got, err := readAnswer(context.Background(), strings.NewReader(in))
		if err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	if _, err := readAnswer(context.Background(), strings.NewReader("")); err == nil || !strings.Contains(err.Error(), "read the answer") {
		t.Errorf("empty input: %v", err)
	}

	pr, pw := io.Pipe() // a terminal nobody types into
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := readAnswer(ctx, pr)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "interrupted while waiting for an answer; nothing was changed") {
			t.Fatalf("cancelled question: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Ctrl-C did not end the question")
	}
}
