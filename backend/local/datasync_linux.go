package local

import (
	"os"
	"syscall"
)

// datasync flushes f's data (fdatasync: the metadata only when a read
// needs it, as a grown size would).
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// lockFile takes an exclusive lock on f without waiting (flock), so that
// two writers never append to one journal segment; closing f releases it.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
