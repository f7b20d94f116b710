package clocktest

import (
	"reflect"
	"testing"
	"time"
)

// Advance fires due timers in deadline order (creation order on ties, kept
// by Reset), skips stopped ones, fires timers armed by callbacks within the
// window, and shows each callback its own deadline.
func TestFakeAdvance(t *testing.T) {
	start := time.Unix(0, 0)
	c := NewFake(start)
	var got []string
	at := func(name string) func() {
		return func() { got = append(got, name+"@"+c.Now().Sub(start).String()) }
	}
	c.AfterFunc(2*time.Second, at("b"))
	a := c.AfterFunc(2*time.Second, at("a"))
	c.AfterFunc(time.Second, func() {
		at("first")()
		c.AfterFunc(500*time.Millisecond, at("armed-by-callback"))
	})
	stopped := c.AfterFunc(time.Second, at("stopped"))
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop must report true once, then false")
	}
	late := c.AfterFunc(10*time.Second, at("late"))
	if a.Reset(2*time.Second) != true {
		t.Fatal("Reset of a pending timer must report true")
	}
	if c.Pending() != 4 {
		t.Fatalf("Pending() = %d, want 4", c.Pending())
	}
	c.Advance(3 * time.Second)
	want := []string{"first@1s", "armed-by-callback@1.5s", "b@2s", "a@2s"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if now := c.Now().Sub(start); now != 3*time.Second {
		t.Fatalf("Now after Advance(3s) = +%v", now)
	}
	if late.Reset(time.Second) != true || c.Pending() != 1 {
		t.Fatal("the late timer should be pending and re-armed")
	}
	c.Advance(time.Second)
	if got[len(got)-1] != "late@4s" {
		t.Fatalf("re-armed timer fired as %v", got[len(got)-1])
	}
	if stopped.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer must report false")
	}
	c.Advance(time.Second)
	if got[len(got)-1] != "stopped@5s" {
		t.Fatalf("a stopped timer re-armed by Reset fired as %v", got[len(got)-1])
	}
}
