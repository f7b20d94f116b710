package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rpdhq/rpd/internal/buildinfo"
)

const versionHelp = `
Prints the version of rpd, the Go toolchain that built it and the commit it
was built from: the one stamped at release time (-ldflags -X, see
docs/operations.md), else the one Go's VCS stamping recorded, else (an
unstamped developer build) the HEAD of the source checkout it was compiled
in, marked as such. GET /v1/status ("version") and the rpd_build_info metric
report the same.
`

func runVersion(_ context.Context, e *env, args []string) int {
	fs := newFlagSet("version", "[options]", versionHelp)
	asJSON := fs.Bool("json", false, "print the version information as JSON")
	if code, ok := parseFlags(e, fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		msg := fmt.Sprintf("rpd version: unexpected argument %q: version takes only options", fs.Arg(0))
		if *asJSON {
			writeJSONError(e.stdout, msg, nil)
		} else {
			fmt.Fprintln(e.stderr, msg)
		}
		return 1
	}
	bi := buildinfo.Read()
	if *asJSON {
		b, _ := json.MarshalIndent(bi, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", b)
		return 0
	}
	fmt.Fprintf(e.stdout, "rpd %s\n", bi.Version)
	fmt.Fprintf(e.stdout, "%s %s\n", bi.GoVersion, bi.Platform)
	if bi.Revision != "" {
		note := ""
		switch {
		case bi.RevisionSource == buildinfo.SourceCheckout:
			note = " (unstamped build: HEAD of the source checkout it was compiled in)"
		case bi.Modified:
			note = " (modified)"
		}
		if bi.Time != "" {
			note += " " + bi.Time
		}
		fmt.Fprintf(e.stdout, "commit %s%s\n", bi.Revision, note)
	}
	return 0
}
