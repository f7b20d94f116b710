package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
)

// runHelp is "rpd help [COMMAND]". It is not in the command table (the table
// would then refer to itself); runEnv dispatches it.
func runHelp(ctx context.Context, e *env, args []string) int {
	switch len(args) {
	case 0:
		printHelp(ctx, e, e.stdout, true)
		return 0
	case 1:
		c, ok := lookup(args[0])
		if !ok {
			fmt.Fprintf(e.stderr, "rpd help: unknown command %q. Run \"rpd help\" for the list of commands.\n", args[0])
			return 1
		}
		return c.run(ctx, e, []string{"-h"})
	default:
		fmt.Fprintf(e.stderr, "Usage: rpd help [COMMAND]\n")
		return 1
	}
}

// printHelp lists every command with its synopsis and, when full, every
// command's flags, collected by running the command with -h.
func printHelp(ctx context.Context, e *env, w io.Writer, full bool) {
	fmt.Fprintf(w, "Usage: rpd [-version] [-help] COMMAND [options] [args]\n\n")
	fmt.Fprintf(w, "rpd reconciles CI capacity (runner queues, budgets, VM ceilings, pools)\nwith the .hcl files that declare it.\n\nCommands:\n")
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.synopsis)
	}
	fmt.Fprintf(w, "  %-*s  %s\n", width, "help", "Show this help, or a command's with \"rpd help COMMAND\"")
	if !full {
		fmt.Fprintf(w, "\nRun \"rpd help\" for every command's options.\n")
		return
	}
	fmt.Fprintf(w, "\nFlags are single-dash long options placed before the arguments\n(-no-color; --no-color works too).\n")
	for _, c := range commands {
		var buf bytes.Buffer
		sub := *e
		sub.stdout, sub.stderr = &buf, &buf
		c.run(ctx, &sub, []string{"-h"})
		fmt.Fprintf(w, "\n%s\n", strings.Repeat("-", 72))
		w.Write(buf.Bytes())
	}
}
