package spec

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

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
	// maxValueBytes bounds the string bytes, and maxValueElems the
	// collection elements, of any one value: a function argument or result,
	// a local, an attribute.
	maxValueBytes = 1 << 20
	maxValueElems = 10_000
	// maxWork bounds the total size (bytes plus elements) of all function
	// arguments and results in one load, which bounds the time a for
	// expression calling functions can take.
	maxWork = 1 << 20
)

// Limits on the raw source, checked before parsing: HCL's parser recurses
// once per nesting level, and a file of a million "[" would overflow the
// goroutine stack, which no recover can catch.
const (
	maxFileBytes = 4 << 20
	maxNesting   = 256
	maxUnaryRun  = 10_000
)

// CheckSource reports a file that is too large or nests brackets or unary
// operators deeper than HCL's parser can safely follow; call it before
// parsing HCL from untrusted bytes (the loader does; so does rpd fmt). Brackets are counted
// everywhere, strings and comments included: a string cannot hide real
// nesting from a scanner that doesn't know where strings end, and no
// sensible file has 256 unclosed brackets in its comments.
func CheckSource(name string, src []byte) *hcl.Diagnostic {
	if len(src) > maxFileBytes {
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Configuration file too large",
			Detail:   fmt.Sprintf("%s is %d bytes; the limit is %d.", name, len(src), maxFileBytes),
			Subject:  &hcl.Range{Filename: name, Start: hcl.InitialPos, End: hcl.InitialPos},
		}
	}
	depth, unary := 0, 0
	line, col := 1, 1
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '(' || c == '[' || c == '{':
			depth++
			unary = 0
		case c == ')' || c == ']' || c == '}':
			depth = max(depth-1, 0)
			unary = 0
		case c == '-' || c == '!':
			unary++
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		default:
			unary = 0
		}
		if depth > maxNesting || unary > maxUnaryRun {
			pos := hcl.Pos{Line: line, Column: col, Byte: i}
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Nesting too deep",
				Detail:   fmt.Sprintf("Brackets nest more than %d levels deep here, or more than %d unary operators follow each other; no configuration needs that.", maxNesting, maxUnaryRun),
				Subject:  &hcl.Range{Filename: name, Start: pos, End: pos},
			}
		}
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return nil
}

// workBudget is what is left of maxWork in one load.
type workBudget struct{ left int }

// spend takes n units and reports whether the budget still holds.
func (w *workBudget) spend(n int) error {
	w.left -= n
	if w.left < 0 {
		return fmt.Errorf("the expressions of this configuration do too much work (function arguments and results over %d bytes and elements in total): simplify them", maxWork)
	}
	return nil
}

// errTooLarge is wrapped by the limits' errors.
var errTooLarge = fmt.Errorf("value too large (limits: %d bytes of strings and %d elements per value)", maxValueBytes, maxValueElems)

// valueCost returns the string bytes and collection elements of v, counting
// shared parts each time they appear and stopping once past the limits.
func valueCost(v cty.Value) (bytes, elems int) {
	var walk func(v cty.Value)
	walk = func(v cty.Value) {
		if bytes > maxValueBytes || elems > maxValueElems || !v.IsKnown() || v.IsNull() {
			return
		}
		ty := v.Type()
		switch {
		case ty == cty.String:
			bytes += len(v.AsString())
		case ty.IsListType() || ty.IsSetType() || ty.IsMapType() || ty.IsTupleType() || ty.IsObjectType():
			elems += v.LengthInt()
			for it := v.ElementIterator(); it.Next() && bytes <= maxValueBytes && elems <= maxValueElems; {
				k, e := it.Element()
				if ty.IsMapType() || ty.IsObjectType() {
					walk(k)
				}
				walk(e)
			}
		}
	}
	walk(v)
	return bytes, elems
}

func checkValueSize(v cty.Value) error {
	if b, e := valueCost(v); b > maxValueBytes || e > maxValueElems {
		return errTooLarge
	}
	return nil
}

// valueSizeDiag reports v when it is over the limits.
func valueSizeDiag(v cty.Value, subject hcl.Range) hcl.Diagnostics {
	if checkValueSize(v) == nil {
		return nil
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Value too large",
		Detail:   fmt.Sprintf("This expression produces a value over the limits of %d bytes of strings and %d elements: a configuration needs nothing that large.", maxValueBytes, maxValueElems),
		Subject:  subject.Ptr(),
	}}
}

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

// limited wraps f so that its arguments and result stay within the value
// limits and are charged to work, and estimate (when not nil) bounds the result's size from the
// arguments before f runs, for functions whose output can be much larger
// than their input.
func limited(work *workBudget, f function.Function, estimate func(args []cty.Value) (int, error)) function.Function {
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      f.Params(),
		VarParam:    f.VarParam(),
		Type:        func(args []cty.Value) (cty.Type, error) { return f.ReturnTypeForValues(args) },
		Impl: func(args []cty.Value, ret cty.Type) (cty.Value, error) {
			for _, a := range args {
				if !a.IsWhollyKnown() {
					// Unknown only stands for a value that already failed.
					return cty.UnknownVal(ret), nil
				}
				b, e := valueCost(a)
				if b > maxValueBytes || e > maxValueElems {
					return cty.NilVal, errTooLarge
				}
				if err := work.spend(1 + b + e); err != nil {
					return cty.NilVal, err
				}
			}
			if estimate != nil && allKnown(args) {
				n, err := estimate(args)
				if err != nil {
					return cty.NilVal, err
				}
				if n > maxValueBytes {
					return cty.NilVal, errTooLarge
				}
			}
			v, err := f.Call(args)
			if err != nil {
				return v, err
			}
			b, e := valueCost(v)
			if b > maxValueBytes || e > maxValueElems {
				return cty.NilVal, errTooLarge
			}
			if err := work.spend(b + e); err != nil {
				return cty.NilVal, err
			}
			return v, nil
		},
	})
}

func allKnown(args []cty.Value) bool {
	for _, a := range args {
		if !a.IsWhollyKnown() || a.IsNull() {
			return false
		}
	}
	return true
}

func strArg(args []cty.Value, i int) string {
	if i < len(args) && args[i].Type() == cty.String {
		return args[i].AsString()
	}
	return ""
}

// estimateReplace bounds replace(str, substr, replacement).
func estimateReplace(args []cty.Value) (int, error) {
	str, sub, repl := strArg(args, 0), strArg(args, 1), strArg(args, 2)
	n := utf8.RuneCountInString(str) + 1
	if sub != "" {
		n = strings.Count(str, sub)
	}
	return len(str) + n*len(repl), nil
}

// estimateRegexReplace bounds regex_replace(str, pattern, replacement):
// each match may expand to the replacement with every $N as long as the
// whole string.
func estimateRegexReplace(args []cty.Value) (int, error) {
	str, pat, repl := strArg(args, 0), strArg(args, 1), strArg(args, 2)
	re, err := regexp.Compile(pat)
	if err != nil {
		return 0, nil // the function reports it
	}
	n := len(re.FindAllStringIndex(str, -1))
	per := len(repl)
	if strings.Contains(repl, "$") {
		per += strings.Count(repl, "$") * len(str)
	}
	return len(str) + n*per, nil
}

// estimateJoin bounds join(sep, lists...).
func estimateJoin(args []cty.Value) (int, error) {
	sep := strArg(args, 0)
	total, count := 0, 0
	for _, l := range args[1:] {
		if !l.CanIterateElements() {
			continue
		}
		for it := l.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if e.Type() == cty.String && e.IsKnown() && !e.IsNull() {
				total += len(e.AsString())
			}
			count++
		}
	}
	return total + count*len(sep), nil
}

// estimateIndent bounds indent(n, str).
func estimateIndent(args []cty.Value) (int, error) {
	if err := checkIndent(args); err != nil {
		return 0, err
	}
	n, _ := args[0].AsBigFloat().Int64()
	str := strArg(args, 1)
	return len(str) + (strings.Count(str, "\n")+1)*int(max(n, 0)), nil
}

// estimateFormat bounds format(fmt, args...): every verb may print the
// widest argument padded to the widest width.
func estimateFormat(args []cty.Value) (int, error) {
	if err := checkFormatWidths(args); err != nil {
		return 0, err
	}
	widest := 0
	for _, a := range args[1:] {
		b, e := valueCost(a)
		widest = max(widest, b+e*24+24)
	}
	f := strArg(args, 0)
	return len(f) + strings.Count(f, "%")*(maxFormatWidth+widest), nil
}

// estimateFormatList bounds formatlist(fmt, args...): format's bound per
// element of the longest list argument.
func estimateFormatList(args []cty.Value) (int, error) {
	per, err := estimateFormat(args)
	if err != nil {
		return 0, err
	}
	n := 1
	for _, a := range args[1:] {
		if a.Type().IsListType() || a.Type().IsTupleType() {
			n = max(n, a.LengthInt())
		}
	}
	return per * n, nil
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
