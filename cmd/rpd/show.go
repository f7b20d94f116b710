package main

import (
	"context"
	"fmt"
)

const showHelp = `
Renders a saved plan (made with rpd plan -out PLANFILE) as rpd plan showed
it, or with -json as the same JSON document rpd plan -json prints. It reads
only the file: no backend is contacted.
`

func runShow(_ context.Context, e *env, args []string) int {
	fs := newFlagSet("show", "[options] PLANFILE", showHelp)
	asJSON := fs.Bool("json", false, "print the plan as one JSON document (see docs/plan.md)")
	noColor := fs.Bool("no-color", false, "disable colour in the output")
	if code, ok := parseFlags(e, fs, args); !ok {
		return code
	}
	view := newPlanView(*asJSON, e.stdout, e.stderr, e.color(e.stdout, *noColor))
	if fs.NArg() != 1 {
		view.Error(fmt.Errorf("rpd show needs exactly one saved plan file (from rpd plan -out FILE), got %d arguments", fs.NArg()))
		return 1
	}
	p, err := readPlanFile(fs.Arg(0))
	if err != nil {
		view.Error(err)
		return 1
	}
	if err := view.Plan(p); err != nil {
		view.Error(err)
		return 1
	}
	return 0
}
