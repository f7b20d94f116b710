package local

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// directAt returns an appender at end of a file of size bytes whose first
// end bytes are 0xa5 and the rest zeros, the file, and what it holds; the
// test is skipped where the file system refuses O_DIRECT.
func directAt(t *testing.T, size, end int) (*directAppender, *os.File, []byte) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "seg")
	want := make([]byte, size)
	copy(want, bytes.Repeat([]byte{0xa5}, end))
	if err := os.WriteFile(name, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	a, err := openDirect(name, f, int64(end), nil)
	if err != nil {
		t.Skipf("the file system refuses O_DIRECT: %v", err)
	}
	t.Cleanup(func() { a.close() })
	return a, f, want
}

// Appends of every size, from any end (block-aligned or not, as a
// recovered segment's), leave the file holding exactly the bytes appended
// after the bytes before, and zeros past the end; each is durable, asked
// to sync or not.
func TestDirectAppendKeepsTheBytes(t *testing.T) {
	for _, end := range []int{headerSize, headerSize + 1, 3*directBlock - 7, 5*directBlock + 300} {
		a, f, want := directAt(t, 64*directBlock, end)
		rng := rand.New(rand.NewPCG(uint64(end), 1))
		at := end
		for i := range 60 {
			n := []int{1, 13, 300, directBlock - 1, directBlock, directBlock + 1, 2*directBlock + 5}[rng.IntN(7)]
			if at+n > len(want) {
				break
			}
			p := make([]byte, n)
			for j := range p {
				p[j] = byte(rng.IntN(255) + 1)
			}
			durable, err := a.append(p, int64(at), i%3 == 0)
			if err != nil {
				t.Fatalf("append %d bytes at %d: %v", n, at, err)
			}
			if !durable {
				// With RWF_DSYNC every append is durable: a delete left in
				// the disk's cache must not lie behind a grant's block.
				t.Fatalf("append %d at %d (sync %v) not durable", n, at, i%3 == 0)
			}
			copy(want[at:], p)
			at += n
		}
		got, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Fatalf("from end %d: the file differs from what was appended at byte %d (of %d; appended up to %d)", end, i, len(want), at)
		}
	}
}

// An append at an offset other than the end the appender keeps is refused,
// not written over the records before it.
func TestDirectAppendRefusesAGap(t *testing.T) {
	a, _, _ := directAt(t, 8*directBlock, headerSize)
	if _, err := a.append([]byte("x"), headerSize+10, true); err == nil {
		t.Fatal("an append past the end was written; want an error")
	}
}

// Without RWF_DSYNC (an older kernel) a synced append is a write and an
// fdatasync, an append without sync a plain write (made durable by the
// next fdatasync), with the same bytes.
func TestDirectAppendWithoutPerWriteSync(t *testing.T) {
	a, f, want := directAt(t, 8*directBlock, headerSize)
	a.dsync = false
	p := bytes.Repeat([]byte("r"), 5000)
	if durable, err := a.append(p, headerSize, false); err != nil || durable {
		t.Fatalf("an append without sync: durable %v, %v; want not durable", durable, err)
	}
	if durable, err := a.append(p, headerSize+5000, true); err != nil || !durable {
		t.Fatalf("a synced append: durable %v, %v; want durable", durable, err)
	}
	copy(want[headerSize:], p)
	copy(want[headerSize+5000:], p)
	if got, _ := os.ReadFile(f.Name()); !bytes.Equal(got, want) {
		t.Fatal("the file does not hold the appended bytes")
	}
}

// The writer appends with direct I/O where the file system takes it, and
// buffered with fdatasync where it does not (forced here), or where a
// direct write is refused (a misaligned buffer stands for a file system
// that needs another alignment): either way every grant is read back after
// a reopen.
func TestJournalAppendsDirectOrBuffered(t *testing.T) {
	for _, mode := range []string{"direct", "buffered", "refused"} {
		t.Run(mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.db")
			b, ps, _, _ := lazyLeader(t, path, nil)
			b.j.noDirect = mode == "buffered"
			ctx := context.Background()
			for i := range 50 {
				if err := ps.PutLease(ctx, rec(fmt.Sprint("l", i))); err != nil {
					t.Fatal(err)
				}
				if w := b.j.w; i == 9 && mode == "refused" {
					if w.d == nil {
						t.Skip("the file system refuses O_DIRECT")
					}
					w.d.buf = alignedBlocks(1<<20 + directBlock)[1:]
				}
			}
			w := b.j.w
			if mode == "direct" && w.buffered {
				t.Skip("the file system refuses O_DIRECT")
			}
			if buffered := mode != "direct"; (w.d == nil) != buffered || w.buffered != buffered {
				t.Fatalf("appender: direct %v, buffered %v; want buffered %v", w.d != nil, w.buffered, buffered)
			}
			b.Close()
			b2, err := Open(ctx, path, Options{Stack: "s"})
			if err != nil {
				t.Fatal(err)
			}
			defer b2.Close()
			if n := len(leaseIDs(t, b2)); n != 50 {
				t.Fatalf("%d lease records read back after a reopen; want 50", n)
			}
		})
	}
}
