package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/reconcile"
)

const forceUnlockHelp = `
Removes the state lock LOCK_ID of the stack configured in DIR or FILE
(default the current directory), for when the process that held it is gone
and its lease has not run out yet. The lock ID is in the error of the
command that found the lock held.

Removing a lock that a running apply still holds lets two applies change
the same state at once: use it only when you are sure the holder is gone.
`

func runForceUnlock(ctx context.Context, e *env, args []string) int {
	var cf configFlags
	fs := newFlagSet("force-unlock", "[options] LOCK_ID [DIR|FILE]", forceUnlockHelp)
	cf.register(fs)
	force := fs.Bool("force", false, "do not ask for confirmation")
	if code, ok := parseFlags(e, fs, args); !ok {
		return code
	}
	color := e.color(e.stdout, cf.noColor)
	view := newPlanView(false, e.stdout, e.stderr, color)
	if fs.NArg() < 1 || fs.NArg() > 2 {
		view.Error(fmt.Errorf("rpd force-unlock needs the lock ID (and optionally the configuration directory or file), got %d arguments", fs.NArg()))
		return 1
	}
	id, path := fs.Arg(0), "."
	if fs.NArg() == 2 {
		path = fs.Arg(1)
	}
	cfg, code := cf.load(e, path)
	if cfg == nil {
		return code
	}
	b, err := open.Open(ctx, cfg.Stack, reconcile.BackendConfigOf(cfg.Backend), open.Options{ReadOnly: true})
	if err != nil {
		view.Error(err)
		return 1
	}
	defer b.Close()
	if b.Lock == nil {
		view.Error(fmt.Errorf("the state of stack %s is not locked: the %s holds no lock, so there is nothing to unlock", cfg.Stack, b.Where))
		return 1
	}
	// Check the ID before asking anything: a wrong ID is the common
	// mistake, and the answer to it is the right ID.
	if err := checkLockID(ctx, b.Lock, cfg.Stack, id); err != nil {
		view.Error(err)
		return 1
	}
	if !*force {
		if err := confirmUnlock(ctx, e, id, colorizer(color)); err != nil {
			view.Error(err)
			return 1
		}
	}
	if err := b.Lock.ForceUnlock(ctx, id); err != nil {
		view.Error(fmt.Errorf("could not remove lock %s of stack %s: %w", id, cfg.Stack, err))
		return 1
	}
	fmt.Fprintf(e.stdout, "%s\n\nThe state lock of stack %s has been removed. rpd commands can now take it again.\n", colorizer(color).bold(colorizer(color).green("rpd state has been successfully unlocked!")), cfg.Stack)
	return 0
}

// checkLockID returns nil when the stack's state is locked under id, and
// otherwise an error that says what is there instead. The locker has no
// read of the lock, so this tries to take it for a few seconds: a held
// lock answers with its holder; a free one is taken and released at once
// (an expired one is taken over, which frees it as unlocking would).
func checkLockID(ctx context.Context, l backend.Locker, stack, id string) error {
	probe := backend.LockInfo{ID: "check-" + id, Who: reconcile.DefaultWho(), Operation: "force-unlock (checking the lock ID)"}
	got, err := l.Lock(ctx, probe, 5*time.Second)
	var locked *backend.LockedError
	switch {
	case err == nil:
		if uerr := l.Unlock(ctx, got.ID); uerr != nil {
			return fmt.Errorf("the state of stack %s is not locked, so there is nothing to unlock, but releasing the lock taken to check it failed (its 5 s lease frees it): %w", stack, uerr)
		}
		return fmt.Errorf("the state of stack %s is not locked (or its lock had expired): there is nothing to unlock", stack)
	case errors.As(err, &locked) && locked.Holder.ID == id:
		return nil
	case errors.As(err, &locked):
		h := locked.Holder
		return fmt.Errorf("lock ID %s is not the lock on stack %s's state, which is held under ID %s by %s (operation %q, since %s); nothing was unlocked — if that holder is gone, run rpd force-unlock %s", id, stack, h.ID, h.Who, h.Operation, h.Created.Format(time.RFC3339), h.ID)
	default:
		return fmt.Errorf("could not read the lock of stack %s: %w", stack, err)
	}
}

func confirmUnlock(ctx context.Context, e *env, id string, c colorizer) error {
	if !stdinIsTerminal(e) {
		return errors.New("force-unlock needs confirmation, but standard input is not a terminal: re-run with -force")
	}
	fmt.Fprintf(e.stdout, "%s\n  rpd will remove the lock %s on the stack's state.\n  This lets other rpd commands change the state even if the holder still runs.\n  Only 'yes' will be accepted to confirm.\n\n  %s ", c.bold("Do you really want to force-unlock?"), id, c.bold("Enter a value:"))
	line, err := readAnswer(ctx, e.stdin)
	if err != nil {
		return err
	}
	if line != "yes" {
		return errors.New("force-unlock cancelled")
	}
	return nil
}
