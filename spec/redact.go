package spec

import (
	"bytes"
	"fmt"
	"regexp"

	"github.com/hashicorp/hcl/v2"
)

// tokenLine matches a source line that assigns the token attribute; it
// finds the attribute in a file that does not parse, where no attribute
// range exists.
var tokenLine = regexp.MustCompile(`^\s*token\s*=`)

// redactToken rewrites, in place, every diagnostic whose subject or context
// touches the token attribute (its range, token, when the rpd block was
// read, or any line assigning token), so that neither the message nor the
// source snippet a renderer prints from the subject shows the expression:
// written without quotes, `token = s3cr3t` is a reference to an unknown
// "s3cr3t", and the diagnostic would carry the secret to the terminal, the
// daemon's log and /v1/status. The diagnostic keeps its summary and
// severity and names the file and line in its detail instead.
func redactToken(diags hcl.Diagnostics, srcs map[string][]byte, token *hcl.Range) {
	lines := map[string][][]byte{}
	touches := func(r *hcl.Range) bool {
		if r == nil {
			return false
		}
		if token != nil && r.Filename == token.Filename && r.Start.Line <= token.End.Line && token.Start.Line <= r.End.Line {
			return true
		}
		ls, ok := lines[r.Filename]
		if !ok {
			ls = bytes.Split(srcs[r.Filename], []byte("\n"))
			lines[r.Filename] = ls
		}
		for n := r.Start.Line; n <= r.End.Line && n >= 1 && n <= len(ls); n++ {
			if tokenLine.Match(ls[n-1]) {
				return true
			}
		}
		return false
	}
	for _, d := range diags {
		if !touches(d.Subject) && !touches(d.Context) {
			continue
		}
		at := d.Subject
		if at == nil {
			at = d.Context
		}
		d.Detail = fmt.Sprintf("The token attribute (%s line %d) is not shown, because its text may be the secret itself. Write the token as a quoted string, or better, pass it in RPD_TOKEN or as var.NAME.", at.Filename, at.Start.Line)
		d.Subject, d.Context, d.Expression, d.EvalContext = nil, nil, nil, nil
	}
}
