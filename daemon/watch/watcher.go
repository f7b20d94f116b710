package watch

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Defaults of Options' zero fields.
const (
	DefaultDebounce = 100 * time.Millisecond
	DefaultMaxDelay = time.Second
	DefaultResync   = 60 * time.Second
	DefaultPoll     = time.Second
)

// Reason says why a Watcher triggered.
type Reason string

const (
	// ReasonChange: a relevant file system event, after debouncing.
	ReasonChange Reason = "change"
	// ReasonResync: the periodic resync, or the one that follows a watcher
	// error or event overflow (events may have been lost).
	ReasonResync Reason = "resync"
	// ReasonPoll: the polling fallback's tick.
	ReasonPoll Reason = "poll"
)

// Options configure a Watcher. Zero fields take the defaults above.
type Options struct {
	// Debounce is the quiet time that ends a burst of events.
	Debounce time.Duration
	// MaxDelay bounds how long a continuous burst delays its trigger.
	MaxDelay time.Duration
	// Resync is the mean period of the safety-net resync (±10% jitter, so
	// that many daemons do not resync in step). Negative disables it.
	Resync time.Duration
	// Poll is the polling fallback's period.
	Poll time.Duration
	// PollOnly skips fsnotify and polls, for file systems where inotify
	// sees nothing (some network and FUSE mounts).
	PollOnly bool
	// Logger receives watcher errors and mode changes; nil discards.
	Logger *slog.Logger
}

// Watcher triggers when the configuration at one path may have changed.
type Watcher struct {
	path   string // as given: a directory or a file
	dir    string // the directory watched
	file   string // base name of the watched file; "" in directory mode
	opts   Options
	log    *slog.Logger
	polled bool
}

// New returns a Watcher of path, a configuration directory or a single
// configuration file. It touches nothing until Run.
func New(path string, opts Options) *Watcher {
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = DefaultMaxDelay
	}
	if opts.Resync == 0 {
		opts.Resync = DefaultResync
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{path: filepath.Clean(path), opts: opts, log: opts.Logger}
	w.dir = w.path
	if info, err := os.Stat(w.path); err == nil && !info.IsDir() {
		w.dir, w.file = filepath.Dir(w.path), filepath.Base(w.path)
	}
	return w
}

// Run watches until ctx is done, calling trigger (from Run's goroutine, one
// call at a time) whenever the configuration may have changed, and once at
// the start, as soon as its watches are in place, so that a change made
// between the caller's last snapshot and Run is not missed. A slow
// trigger delays later ones; events during it are coalesced. Run returns
// nil when ctx is done; it falls back to polling, logging why, when
// fsnotify is unavailable, and never gives up on its own.
func (w *Watcher) Run(ctx context.Context, trigger func(Reason)) error {
	if w.opts.PollOnly {
		return w.poll(ctx, trigger)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		w.log.Warn("cannot create a file system watcher; polling the configuration instead", "path", w.path, "every", w.opts.Poll, "err", err)
		return w.poll(ctx, trigger)
	}
	defer fw.Close()
	// The parent is watched so that the directory's own removal, rename or
	// re-creation is seen; failing to watch it only loses that.
	if err := fw.Add(filepath.Dir(w.dir)); err != nil {
		w.log.Warn("cannot watch the configuration's parent directory; a replaced directory is seen at the next resync", "dir", filepath.Dir(w.dir), "err", err)
	}
	if err := fw.Add(w.dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			w.log.Warn("configuration directory does not exist yet; waiting for it", "dir", w.dir)
		} else {
			w.log.Warn("cannot watch the configuration directory; polling it instead", "dir", w.dir, "every", w.opts.Poll, "err", err)
			return w.poll(ctx, trigger)
		}
	}

	// The watches are in place: anything that changed before them (since
	// the caller's last snapshot) is caught by this first trigger.
	trigger(ReasonResync)

	deb := debouncer{quiet: w.opts.Debounce, max: w.opts.MaxDelay}
	fire := time.NewTimer(time.Hour)
	fire.Stop()
	resync := w.resyncTimer()
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			fire.Stop()
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return nil
			}
			if !w.relevant(fw, ev) {
				continue
			}
			deb.event(time.Now())
			at, _ := deb.deadline()
			fire.Reset(time.Until(at))
		case err, ok := <-fw.Errors:
			if !ok {
				return nil
			}
			w.log.Warn("file system watcher error; resyncing the configuration now", "dir", w.dir, "err", err)
			_ = fw.Add(w.dir) // the directory may have come back
			trigger(ReasonResync)
		case <-fire.C:
			deb.fire()
			trigger(ReasonChange)
		case <-resync.C():
			_ = fw.Add(w.dir)
			trigger(ReasonResync)
			resync.reset(w.jittered())
		}
	}
}

// relevant reports whether ev may change the configuration, re-adding the
// directory's watch when the directory itself reappears.
func (w *Watcher) relevant(fw *fsnotify.Watcher, ev fsnotify.Event) bool {
	name := filepath.Clean(ev.Name)
	if name == w.dir {
		if ev.Has(fsnotify.Create) {
			if err := fw.Add(w.dir); err != nil {
				w.log.Warn("configuration directory reappeared but cannot be watched; it is seen at the next resync", "dir", w.dir, "err", err)
			}
		}
		return true
	}
	if filepath.Dir(name) != w.dir {
		return false // a sibling of the directory, seen through the parent's watch
	}
	base := filepath.Base(name)
	if base == "..data" {
		return true // a Kubernetes ConfigMap swap: every file may have changed
	}
	if w.file != "" {
		return base == w.file
	}
	return IsConfigName(base)
}

// poll triggers every Poll until ctx is done.
func (w *Watcher) poll(ctx context.Context, trigger func(Reason)) error {
	w.polled = true
	trigger(ReasonPoll)
	t := time.NewTicker(w.opts.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			trigger(ReasonPoll)
		}
	}
}

// Polling reports whether the last Run fell back to polling. Only meaningful
// after Run returned.
func (w *Watcher) Polling() bool { return w.polled }

func (w *Watcher) jittered() time.Duration {
	r := w.opts.Resync
	return r - r/10 + rand.N(r/5+1)
}

// resyncTimer is a timer that never fires when resync is disabled.
type resyncTimer struct{ t *time.Timer }

func (w *Watcher) resyncTimer() resyncTimer {
	if w.opts.Resync < 0 {
		return resyncTimer{}
	}
	return resyncTimer{t: time.NewTimer(w.jittered())}
}

func (r resyncTimer) C() <-chan time.Time {
	if r.t == nil {
		return nil
	}
	return r.t.C
}

func (r resyncTimer) reset(d time.Duration) {
	if r.t != nil {
		r.t.Reset(d)
	}
}

func (r resyncTimer) Stop() {
	if r.t != nil {
		r.t.Stop()
	}
}
