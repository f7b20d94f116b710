package spec

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// Limits that keep a short configuration from making the loader allocate
// gigabytes or run for minutes. Operators write configurations, but the
// daemon reloads whatever lands in its directory and must stay responsive.
const (
	// maxFormatWidth bounds the width and precision of a format verb and
	// the indentation of indent().
	maxFormatWidth = 1000
)

// checkExpr rejects constructs whose cost multiplies: a for expression
// nested in another (range yields at most 1024 elements, so each level of
// nesting multiplies the work by up to 1024).
func checkExpr(expr hcl.Expression) hcl.Diagnostics {
	node, ok := expr.(hclsyntax.Node)
	if !ok {
		return nil
	}
	w := &forDepth{}
	return hclsyntax.Walk(node, w)
}

type forDepth struct{ depth int }

func (w *forDepth) Enter(n hclsyntax.Node) hcl.Diagnostics {
	f, ok := n.(*hclsyntax.ForExpr)
	if !ok {
		return nil
	}
	w.depth++
	if w.depth == 2 {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Nested for expression",
			Detail:   "A for expression inside another is not supported: the work multiplies with each level. Compute the inner list in a local value, or use flatten() over a single for expression.",
			Subject:  f.SrcRange.Ptr(),
		}}
	}
	return nil
}

func (w *forDepth) Exit(n hclsyntax.Node) hcl.Diagnostics {
	if _, ok := n.(*hclsyntax.ForExpr); ok {
		w.depth--
	}
	return nil
}

// guarded wraps f so that check vets its arguments before f runs.
func guarded(f function.Function, check func(args []cty.Value) error) function.Function {
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      f.Params(),
		VarParam:    f.VarParam(),
		Type:        func(args []cty.Value) (cty.Type, error) { return f.ReturnTypeForValues(args) },
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if err := check(args); err != nil {
				return cty.NilVal, err
			}
			return f.Call(args)
		},
	})
}

// checkFormatWidths refuses format strings whose verbs ask for a width or
// precision above maxFormatWidth ("%900000000s").
func checkFormatWidths(args []cty.Value) error {
	if len(args) == 0 || args[0].Type() != cty.String || !args[0].IsKnown() || args[0].IsNull() {
		return nil
	}
	s := args[0].AsString()
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		n := 0
		for i++; i < len(s); i++ {
			c := s[i]
			if c >= '0' && c <= '9' {
				n = n*10 + int(c-'0')
				if n > maxFormatWidth {
					return fmt.Errorf("a width or precision above %d in the format string is not allowed", maxFormatWidth)
				}
				continue
			}
			n = 0
			if c == '.' || c == '-' || c == '+' || c == '#' || c == ' ' || c == '[' || c == ']' {
				continue
			}
			break
		}
	}
	return nil
}

// checkIndent refuses indent(n, ...) with n above maxFormatWidth.
func checkIndent(args []cty.Value) error {
	if len(args) == 0 || args[0].Type() != cty.Number || !args[0].IsKnown() || args[0].IsNull() {
		return nil
	}
	if args[0].AsBigFloat().Cmp(bigFloat(maxFormatWidth)) > 0 {
		return fmt.Errorf("indenting by more than %d spaces is not allowed", maxFormatWidth)
	}
	return nil
}
