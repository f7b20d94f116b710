package ledger

import (
	"time"

	"github.com/rpdhq/rpd/internal/clocktest"
)

// fakeClock is a clocktest.Fake seen as this package's Clock.
type fakeClock struct{ *clocktest.Fake }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer { return c.Fake.AfterFunc(d, f) }

func newFakeClock() *fakeClock {
	return &fakeClock{clocktest.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
}
