package spec

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// TestTokenNeverInDiagnostics: a token written without quotes (an unknown
// reference), of the wrong type, or on a line that does not parse, yields
// an error that names the token attribute's file and line but shows
// neither its text nor its source line, in the message or in a rendered
// snippet.
func TestTokenNeverInDiagnostics(t *testing.T) {
	const secret = "CfgT0ken-9f8e7d"
	for _, tc := range []struct{ name, src string }{
		{"unquoted", "rpd {\n  token = " + secret + "\n}\n"},
		{"unquoted in an expression", "rpd {\n  token = upper(" + secret + ")\n}\n"},
		{"wrong type", "rpd {\n  token = [\"" + secret + "\"]\n}\n"},
		{"does not parse", "rpd {\n  token = \"" + secret + "\n}\n"},
		{"undeclared variable", "rpd {\n  token = var." + secret + "\n}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLoader()
			srcs := map[string][]byte{"main.hcl": []byte(tc.src)}
			cfg, diags := l.LoadSources(srcs, Vars{})
			if cfg != nil || !diags.HasErrors() {
				t.Fatalf("loaded %+v, %v; want an error", cfg, diags)
			}
			var rendered bytes.Buffer
			files := l.Files()
			if files["main.hcl"] == nil {
				files = map[string]*hcl.File{"main.hcl": {Bytes: srcs["main.hcl"]}}
			}
			if err := hcl.NewDiagnosticTextWriter(&rendered, files, 100, false).WriteDiagnostics(diags); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(diags.Error(), secret) || strings.Contains(rendered.String(), secret) {
				t.Fatalf("the token's text reached a diagnostic:\n%s", rendered.String())
			}
			if !strings.Contains(rendered.String(), "token attribute (main.hcl line 2)") {
				t.Fatalf("the diagnostic does not say where the token is:\n%s", rendered.String())
			}
		})
	}
}

// TestTokenRedactionLeavesOtherDiagnostics: diagnostics elsewhere keep
// their subject and detail.
func TestTokenRedactionLeavesOtherDiagnostics(t *testing.T) {
	_, diags := NewLoader().LoadSources(map[string][]byte{"main.hcl": []byte("rpd {\n  token = \"ok\"\n  stack = nope\n}\n")}, Vars{})
	if len(diags) != 1 || diags[0].Subject == nil || diags[0].Subject.Start.Line != 3 || !strings.Contains(diags[0].Detail, `"nope"`) {
		t.Fatalf("diags = %v; want the untouched unknown-reference error on line 3", diags)
	}
}
