package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rpdhq/rpd/backend/open"
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
	if !*force {
		if err := confirmUnlock(ctx, e, id, colorizer(color)); err != nil {
			view.Error(err)
			return 1
		}
	}
	b, err := open.Open(ctx, cfg.Stack, reconcile.BackendConfigOf(cfg.Backend), open.Options{ReadOnly: true})
	if err != nil {
		view.Error(err)
		return 1
	}
	defer b.Close()
	if b.Lock == nil {
		view.Error(fmt.Errorf("the %s holds no lock: nothing to unlock", b.Where))
		return 1
	}
	if err := b.Lock.ForceUnlock(ctx, id); err != nil {
		view.Error(fmt.Errorf("force-unlock %s of stack %s: %w; check the lock ID in the message of the command that found the lock held", id, cfg.Stack, err))
		return 1
	}
	fmt.Fprintf(e.stdout, "%s\n\nThe state lock of stack %s has been removed. rpd commands can now take it again.\n", colorizer(color).bold(colorizer(color).green("rpd state has been successfully unlocked!")), cfg.Stack)
	return 0
}

func confirmUnlock(ctx context.Context, e *env, id string, c colorizer) error {
	w, isWriter := e.stdin.(io.Writer)
	if !isWriter || e.isTerminal == nil || !e.isTerminal(w) {
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
