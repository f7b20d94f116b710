package spec

import (
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// decoder evaluates attributes into Go values, collecting diagnostics. Each
// getter returns ok=false when the attribute is absent, null, unknown (an
// upstream error) or invalid (reported); the caller then keeps its default.
type decoder struct {
	ctx    *hcl.EvalContext
	vars   map[string]bool
	locals map[string]bool
	// required marks attributes whose null value is "missing".
	required map[*hcl.Attribute]bool
	diags    hcl.Diagnostics
}

func (d *decoder) errorf(subject hcl.Range, summary, format string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subject.Ptr(),
	})
}

// value evaluates a after checking its references.
func (d *decoder) value(a *hcl.Attribute) (cty.Value, bool) {
	if a == nil {
		return cty.NilVal, false
	}
	bad := false
	for _, t := range a.Expr.Variables() {
		root := t.RootName()
		name := ""
		if len(t) >= 2 {
			name = attrName(t[1])
		}
		switch {
		case root == "var" && d.vars[name], root == "local" && d.locals[name]:
		case root == "var" && len(t) >= 2:
			d.errorf(t.SourceRange(), "Reference to undeclared input variable", "An input variable named %q is not declared. Add a variable %q block.", name, name)
			bad = true
		case root == "local" && len(t) >= 2:
			d.errorf(t.SourceRange(), "Reference to undeclared local value", "A local value named %q is not declared. Add it to a locals block.", name)
			bad = true
		case root == "var" || root == "local":
			d.errorf(t.SourceRange(), "Invalid reference", "%q alone is not a value: write %s.NAME.", root, root)
			bad = true
		default:
			d.errorf(t.SourceRange(), "Unknown reference", "%q is not something an expression can refer to: only var.NAME and local.NAME are available.", root)
			bad = true
		}
	}
	if bad || appendErrs(&d.diags, checkExpr(a.Expr)) {
		return cty.NilVal, false
	}
	v, ds := a.Expr.Value(d.ctx)
	if !ds.HasErrors() {
		ds = append(ds, valueSizeDiag(v, a.Expr.Range())...)
	}
	d.diags = append(d.diags, ds...)
	if !ds.HasErrors() && v.IsNull() && d.required[a] {
		d.errorf(a.Expr.Range(), "Missing required argument", "The argument %q is required, but its value is null.", a.Name)
	}
	if ds.HasErrors() || v.IsNull() || !v.IsWhollyKnown() {
		return cty.NilVal, false
	}
	return v, true
}

func bigFloat(n int64) *big.Float { return new(big.Float).SetInt64(n) }

func typeError(a *hcl.Attribute, want string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Incorrect attribute value type",
		Detail:   fmt.Sprintf("Inappropriate value for attribute %q: %s is required.", a.Name, want),
		Subject:  a.Expr.Range().Ptr(),
	}
}

func (d *decoder) str(a *hcl.Attribute) (string, bool) {
	v, ok := d.value(a)
	if !ok {
		return "", false
	}
	if !v.Type().IsPrimitiveType() || v.Type() == cty.Bool {
		d.diags = append(d.diags, typeError(a, "a string"))
		return "", false
	}
	v, _ = convert.Convert(v, cty.String)
	return v.AsString(), true
}

func (d *decoder) boolean(a *hcl.Attribute) (bool, bool) {
	v, ok := d.value(a)
	if !ok {
		return false, false
	}
	v, err := convert.Convert(v, cty.Bool)
	if err != nil {
		d.diags = append(d.diags, typeError(a, "a bool (true or false)"))
		return false, false
	}
	return v.True(), true
}

// integer reads a whole number in [min, max].
func (d *decoder) integer(a *hcl.Attribute, min, max int64, why string) (int, bool) {
	v, ok := d.value(a)
	if !ok {
		return 0, false
	}
	return d.intOf(a, v, min, max, why, "a number")
}

// intOf is integer for an already evaluated value.
func (d *decoder) intOf(a *hcl.Attribute, v cty.Value, min, max int64, why, want string) (int, bool) {
	v, err := convert.Convert(v, cty.Number)
	if err != nil {
		d.diags = append(d.diags, typeError(a, want))
		return 0, false
	}
	f := v.AsBigFloat()
	if !f.IsInt() {
		d.errorf(a.Expr.Range(), fmt.Sprintf("Invalid value for %q", a.Name), "%s must be a whole number; got %s.", a.Name, f.Text('g', 10))
		return 0, false
	}
	lo, hi := big.NewFloat(float64(min)), big.NewFloat(float64(max))
	if f.Cmp(lo) < 0 || f.Cmp(hi) > 0 {
		d.errorf(a.Expr.Range(), fmt.Sprintf("Invalid value for %q", a.Name), "%s must be between %d and %d%s; got %s.", a.Name, min, max, why, f.Text('g', 10))
		return 0, false
	}
	n, _ := f.Int64()
	return int(n), true
}

// size reads a byte size (a number of bytes or a string with a unit) of at
// least min and at most max bytes.
func (d *decoder) size(a *hcl.Attribute, min, max uint64) (uint64, bool) {
	v, ok := d.value(a)
	if !ok {
		return 0, false
	}
	var n uint64
	switch v.Type() {
	case cty.Number:
		f := v.AsBigFloat()
		u, acc := f.Uint64()
		if !f.IsInt() || acc != big.Exact {
			d.errorf(a.Expr.Range(), "Invalid size", "%s must be a whole, non-negative number of bytes or a string such as \"512MiB\"; got %s.", a.Name, f.Text('g', 10))
			return 0, false
		}
		n = u
	case cty.String:
		u, err := ParseSize(v.AsString())
		if err != nil {
			detail := err.Error() + "."
			if errors.Is(err, ErrSyntax) {
				detail = fmt.Sprintf("%q is not a size: use a number of bytes or a number with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), such as \"512MiB\".", v.AsString())
			}
			d.errorf(a.Expr.Range(), "Invalid size", "%s", detail)
			return 0, false
		}
		n = u
	default:
		d.diags = append(d.diags, typeError(a, "a size (a number of bytes or a string such as \"512MiB\")"))
		return 0, false
	}
	if n < min {
		d.errorf(a.Expr.Range(), fmt.Sprintf("Invalid value for %q", a.Name), "%s must be at least %d bytes; got %d.", a.Name, min, n)
		return 0, false
	}
	if n > max {
		d.errorf(a.Expr.Range(), fmt.Sprintf("Invalid value for %q", a.Name), "%s must be at most %d bytes; got %d.", a.Name, max, n)
		return 0, false
	}
	return n, true
}

// duration reads a duration in [min, max]; whole requires whole seconds
// (SQS counts in seconds).
func (d *decoder) duration(a *hcl.Attribute, min, max time.Duration, whole bool, why string) (time.Duration, bool) {
	v, ok := d.value(a)
	if !ok {
		return 0, false
	}
	if v.Type() != cty.String {
		d.diags = append(d.diags, typeError(a, "a duration string such as \"30s\""))
		return 0, false
	}
	dur, err := ParseDuration(v.AsString())
	if err != nil {
		d.errorf(a.Expr.Range(), "Invalid duration", "%s. Use Go's duration syntax with an optional day count, such as \"300ms\", \"30s\", \"2m\", \"1h30m\" or \"4d\".", err)
		return 0, false
	}
	if dur < min || dur > max {
		d.errorf(a.Expr.Range(), fmt.Sprintf("Invalid value for %q", a.Name), "%s must be between %s and %s%s; got %s.", a.Name, FormatDuration(min), FormatDuration(max), why, FormatDuration(dur))
		return 0, false
	}
	if whole && dur%time.Second != 0 {
		d.errorf(a.Expr.Range(), fmt.Sprintf("Invalid value for %q", a.Name), "%s must be a whole number of seconds%s; got %s.", a.Name, why, dur)
		return 0, false
	}
	return dur, true
}

// strList reads a list (or set or tuple) of strings.
func (d *decoder) strList(a *hcl.Attribute) ([]string, bool) {
	v, ok := d.value(a)
	if !ok {
		return nil, false
	}
	v, err := convert.Convert(v, cty.List(cty.String))
	if err != nil || v.IsNull() {
		d.diags = append(d.diags, typeError(a, "a list of strings"))
		return nil, false
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			d.diags = append(d.diags, typeError(a, "a list of strings without nulls"))
			return nil, false
		}
		out = append(out, e.AsString())
	}
	return out, true
}
