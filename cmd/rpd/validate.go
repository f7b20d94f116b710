package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/rpdhq/rpd/spec"
)

const validateHelp = `
Validates the configuration in DIR (every *.hcl file in it) or in FILE,
default the current directory: syntax, blocks and attributes, types, value
ranges, names and references. Every problem is reported at once.

Exit status: 0 when the configuration is valid, 1 otherwise.
`

func runValidate(_ context.Context, e *env, args []string) int {
	var cf configFlags
	fs := newFlagSet("validate", "[options] [DIR|FILE]", validateHelp)
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print the result as JSON: {valid, error_count, warning_count, diagnostics}")
	if code, ok := parseFlags(e, fs, args); !ok {
		return code
	}
	path, code, ok := configPath(e, fs)
	if !ok {
		return code
	}
	l := spec.NewLoader()
	_, diags := l.Load(path, cf.specVars(e))
	if *asJSON {
		b, _ := json.MarshalIndent(validateJSON(diags), "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", b)
	} else {
		// As Terraform: errors on stderr, warnings on stdout.
		var errs, warns hcl.Diagnostics
		for _, d := range diags {
			if d.Severity == hcl.DiagWarning {
				warns = append(warns, d)
			} else {
				errs = append(errs, d)
			}
		}
		writeDiagnostics(e.stdout, l.Files(), warns, e.color(e.stdout, cf.noColor), e.width(e.stdout))
		writeDiagnostics(e.stderr, l.Files(), errs, e.color(e.stderr, cf.noColor), e.width(e.stderr))
		if !diags.HasErrors() {
			msg := "The configuration is valid."
			if len(warns) > 0 {
				msg = "The configuration is valid, but there were some validation warnings as shown above."
			}
			if e.color(e.stdout, cf.noColor) {
				msg = "\x1b[32m\x1b[1mSuccess!\x1b[0m " + msg
			} else {
				msg = "Success! " + msg
			}
			if len(warns) > 0 {
				msg = "\n" + msg
			}
			fmt.Fprintln(e.stdout, msg)
		}
	}
	if diags.HasErrors() {
		return 1
	}
	return 0
}

// jsonResult is the -json output of validate, shaped like Terraform's.
type jsonResult struct {
	FormatVersion string           `json:"format_version"`
	Valid         bool             `json:"valid"`
	ErrorCount    int              `json:"error_count"`
	WarningCount  int              `json:"warning_count"`
	Diagnostics   []jsonDiagnostic `json:"diagnostics"`
}

type jsonDiagnostic struct {
	Severity string     `json:"severity"` // "error" or "warning"
	Summary  string     `json:"summary"`
	Detail   string     `json:"detail,omitempty"`
	Range    *jsonRange `json:"range,omitempty"`
}

type jsonRange struct {
	Filename string  `json:"filename"`
	Start    jsonPos `json:"start"`
	End      jsonPos `json:"end"`
}

type jsonPos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

func validateJSON(diags hcl.Diagnostics) jsonResult {
	res := jsonResult{FormatVersion: "1.0", Diagnostics: []jsonDiagnostic{}}
	sorted := append(hcl.Diagnostics(nil), diags...)
	spec.SortDiagnostics(sorted)
	for _, d := range sorted {
		jd := jsonDiagnostic{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			jd.Severity = "warning"
			res.WarningCount++
		} else {
			res.ErrorCount++
		}
		if r := d.Subject; r != nil {
			jd.Range = &jsonRange{
				Filename: r.Filename,
				Start:    jsonPos{r.Start.Line, r.Start.Column, r.Start.Byte},
				End:      jsonPos{r.End.Line, r.End.Column, r.End.Byte},
			}
		}
		res.Diagnostics = append(res.Diagnostics, jd)
	}
	res.Valid = res.ErrorCount == 0
	return res
}
