package spec

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// EnvPrefix is the prefix of environment variables that set input variables:
// RPD_VAR_env=prod sets var.env.
const EnvPrefix = "RPD_VAR_"

// Vars are the values given to a configuration's input variables from
// outside it. Precedence, lowest first: a variable's default, then Env, then
// each of Files in order, then each of Flags in order; a later source
// overrides an earlier one.
//
// The loader never reads the process environment itself: callers pass
// os.Environ() (or a test's list) in Env.
type Vars struct {
	// Env holds "NAME=value" entries; only those named RPD_VAR_<variable>
	// are used, and ones naming undeclared variables are ignored.
	Env []string
	// Files are -var-file paths: HCL files of name = value attributes. A
	// value for an undeclared variable is a warning.
	Files []string
	// Flags are -var arguments "name=value". A value for an undeclared
	// variable is an error.
	Flags []string
}

// variable is a declared input variable.
type variable struct {
	name     string
	typ      cty.Type
	def      cty.Value // cty.NilVal when none
	decl     *hcl.Block
	rules    []validation
	value    cty.Value
	valRange *hcl.Range // where the final value came from, if a file
}

type validation struct {
	condition hcl.Expression
	message   string
}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "type"},
		{Name: "default"},
		{Name: "description"},
		{Name: "sensitive"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "validation"}},
}

var validationSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "condition", Required: true},
		{Name: "error_message", Required: true},
	},
}

// evalContext resolves variables and locals (phase four) and returns the
// context every block is decoded with. Variables or locals that failed are
// unknown in the context, so later phases don't repeat the error.
func (l *Loader) evalContext(m *module, in Vars) (*hcl.EvalContext, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	base := &hcl.EvalContext{Functions: functions()}

	vars := map[string]*variable{}
	var order []*variable
	for _, b := range m.variables {
		v, ds := decodeVariable(b, base)
		diags = append(diags, ds...)
		vars[v.name] = v
		order = append(order, v)
	}

	// set gives variable name the value raw from source ("-var option",
	// "environment variable RPD_VAR_x", "variable file F").
	set := func(name, source string, raw cty.Value, rng *hcl.Range, fromString bool, undeclared func() *hcl.Diagnostic) {
		v, ok := vars[name]
		if !ok {
			if d := undeclared(); d != nil {
				diags = append(diags, d)
			}
			return
		}
		val, err := v.coerce(raw, fromString)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid value for variable",
				Detail:   fmt.Sprintf("The value given for variable %q by the %s is not valid: %s. Fix the %s.", name, source, err, source),
				Subject:  subjectOr(rng, v.decl.DefRange),
			})
			v.value = cty.DynamicVal
			return
		}
		v.value, v.valRange = val, rng
	}

	// Environment: lowest precedence after defaults.
	env := append([]string(nil), in.Env...)
	sort.Strings(env) // deterministic when a name repeats
	for _, kv := range env {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, EnvPrefix) {
			continue
		}
		name := strings.TrimPrefix(k, EnvPrefix)
		set(name, "environment variable "+k, cty.StringVal(val), nil, true, func() *hcl.Diagnostic { return nil })
	}

	// -var-file files, in order.
	for _, fn := range in.Files {
		src, err := os.ReadFile(fn)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Failed to read file",
				Detail:   fmt.Sprintf("The variable file %q could not be read: %v.", fn, err),
			})
			continue
		}
		if d := CheckSource(fn, src); d != nil {
			diags = append(diags, d)
			continue
		}
		f, ds := l.parser.ParseHCL(src, fn)
		diags = append(diags, ds...)
		if ds.HasErrors() || f == nil {
			continue
		}
		attrs, ds := f.Body.JustAttributes()
		diags = append(diags, ds...)
		for _, a := range sortedAttrs(attrs) {
			if len(a.Expr.Variables()) > 0 {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Variables not allowed",
					Detail:   "A variable file holds literal values only; it cannot refer to variables or locals.",
					Subject:  a.Expr.Range().Ptr(),
				})
				continue
			}
			ds := checkExpr(a.Expr)
			var val cty.Value
			if !ds.HasErrors() {
				val, ds = a.Expr.Value(base)
			}
			if !ds.HasErrors() {
				ds = append(ds, valueSizeDiag(val, a.Expr.Range())...)
			}
			diags = append(diags, ds...)
			if ds.HasErrors() {
				if v, ok := vars[a.Name]; ok {
					v.value = cty.DynamicVal
				}
				continue
			}
			a := a
			set(a.Name, "variable file "+fn, val, a.Expr.Range().Ptr(), false, func() *hcl.Diagnostic {
				return &hcl.Diagnostic{
					Severity: hcl.DiagWarning,
					Summary:  "Value for undeclared variable",
					Detail:   fmt.Sprintf("The variable file sets %q, but the configuration declares no variable of that name; the value is ignored.", a.Name),
					Subject:  a.NameRange.Ptr(),
				}
			})
		}
	}

	// -var flags, in order: highest precedence.
	for _, kv := range in.Flags {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid -var option",
				Detail:   fmt.Sprintf("The -var option %q is not of the form NAME=VALUE.", kv),
			})
			continue
		}
		name = strings.TrimSpace(name)
		set(name, "-var option", cty.StringVal(val), nil, true, func() *hcl.Diagnostic {
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Value for undeclared variable",
				Detail:   fmt.Sprintf("A -var option sets %q, but the configuration declares no variable of that name. Declare it with a variable %q block, or remove the option.", name, name),
			}
		})
	}

	values := map[string]cty.Value{}
	for _, v := range order {
		if v.value == cty.NilVal {
			if v.def == cty.NilVal {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "No value for required variable",
					Detail:   fmt.Sprintf("Variable %q has no default, so a value must be given with -var, -var-file or the %s%s environment variable.", v.name, EnvPrefix, v.name),
					Subject:  v.decl.DefRange.Ptr(),
				})
				v.value = cty.DynamicVal
			} else {
				v.value = v.def
			}
		}
		diags = append(diags, v.validate(base)...)
		values[v.name] = v.value
	}

	ctx := base.NewChild()
	ctx.Variables = map[string]cty.Value{"var": cty.ObjectVal(values)}
	diags = append(diags, evalLocals(ctx, m.locals, vars)...)
	return ctx, diags
}

func subjectOr(r *hcl.Range, fallback hcl.Range) *hcl.Range {
	if r != nil {
		return r
	}
	return fallback.Ptr()
}

func decodeVariable(b *hcl.Block, base *hcl.EvalContext) (*variable, hcl.Diagnostics) {
	v := &variable{name: b.Labels[0], typ: cty.DynamicPseudoType, decl: b}
	content, diags := b.Body.Content(variableSchema)
	if a, ok := content.Attributes["type"]; ok {
		ty, ds := typeexpr.TypeConstraint(a.Expr)
		diags = append(diags, ds...)
		if !ds.HasErrors() {
			v.typ = ty
		}
	}
	if a, ok := content.Attributes["description"]; ok {
		val, ds := a.Expr.Value(nil)
		diags = append(diags, ds...)
		if !ds.HasErrors() && !val.IsNull() && val.Type() != cty.String {
			diags = append(diags, typeError(a, "a string"))
		}
	}
	if a, ok := content.Attributes["sensitive"]; ok {
		val, ds := a.Expr.Value(nil)
		diags = append(diags, ds...)
		if !ds.HasErrors() && val.Type() != cty.Bool {
			diags = append(diags, typeError(a, "a bool"))
		}
	}
	if a, ok := content.Attributes["default"]; ok {
		v.def = cty.DynamicVal // until known good: a bad default is not a missing one
		if len(a.Expr.Variables()) > 0 {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Variables not allowed",
				Detail:   "A variable's default must be a literal value; it cannot refer to other variables or locals.",
				Subject:  a.Expr.Range().Ptr(),
			})
		} else if !appendErrs(&diags, checkExpr(a.Expr)) {
			val, ds := a.Expr.Value(base)
			if !ds.HasErrors() {
				ds = append(ds, valueSizeDiag(val, a.Expr.Range())...)
			}
			diags = append(diags, ds...)
			if !ds.HasErrors() {
				conv, err := convert.Convert(val, v.typ)
				if err != nil {
					diags = append(diags, &hcl.Diagnostic{
						Severity: hcl.DiagError,
						Summary:  "Invalid default value for variable",
						Detail:   fmt.Sprintf("This default value is not compatible with the variable's type constraint: %s.", err),
						Subject:  a.Expr.Range().Ptr(),
					})
				} else {
					v.def = conv
				}
			}
		}
	}
	for _, vb := range content.Blocks {
		vc, ds := vb.Body.Content(validationSchema)
		diags = append(diags, ds...)
		cond, ok1 := vc.Attributes["condition"]
		msgAttr, ok2 := vc.Attributes["error_message"]
		if !ok1 || !ok2 {
			continue
		}
		bad := false
		for _, t := range cond.Expr.Variables() {
			if t.RootName() != "var" || len(t) < 2 || attrName(t[1]) != v.name {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid reference in variable validation",
					Detail:   fmt.Sprintf("A validation condition may refer only to the variable it checks, var.%s.", v.name),
					Subject:  t.SourceRange().Ptr(),
				})
				bad = true
			}
		}
		if appendErrs(&diags, checkExpr(cond.Expr)) || appendErrs(&diags, checkExpr(msgAttr.Expr)) {
			continue
		}
		msg, ds := msgAttr.Expr.Value(base)
		diags = append(diags, ds...)
		if ds.HasErrors() || bad {
			continue
		}
		if msg.Type() != cty.String || msg.IsNull() || strings.TrimSpace(msg.AsString()) == "" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid validation error message",
				Detail:   "error_message must be a non-empty string.",
				Subject:  msgAttr.Expr.Range().Ptr(),
			})
			continue
		}
		v.rules = append(v.rules, validation{condition: cond.Expr, message: msg.AsString()})
	}
	return v, diags
}

func attrName(t hcl.Traverser) string {
	switch t := t.(type) {
	case hcl.TraverseAttr:
		return t.Name
	case hcl.TraverseIndex:
		if t.Key.Type() == cty.String && t.Key.IsKnown() && !t.Key.IsNull() {
			return t.Key.AsString()
		}
	}
	return ""
}

// coerce converts a raw value to the variable's type. Values from -var and
// the environment arrive as strings: for primitive (or unconstrained) types
// the string is the value; for collection and structural types it is parsed
// as an HCL expression, as Terraform does.
func (v *variable) coerce(raw cty.Value, fromString bool) (cty.Value, error) {
	if fromString && !v.typ.IsPrimitiveType() && v.typ != cty.DynamicPseudoType {
		src := raw.AsString()
		typ := typeexpr.TypeString(v.typ)
		notHCL := fmt.Errorf("%q is not a %s written in HCL: %s", src, typ, hclExample(v.name, v.typ))
		expr, ds := hclsyntax.ParseExpression([]byte(src), "<value for var."+v.name+">", hcl.InitialPos)
		if ds.HasErrors() || len(expr.Variables()) > 0 {
			// A bare word (t3.small) parses as a reference to a variable.
			return cty.NilVal, notHCL
		}
		if ds := checkExpr(expr); ds.HasErrors() {
			return cty.NilVal, fmt.Errorf("%s", ds[0].Summary)
		}
		val, ds := expr.Value(&hcl.EvalContext{Functions: functions()})
		if ds.HasErrors() {
			return cty.NilVal, notHCL
		}
		raw = val
	}
	val, err := convert.Convert(raw, v.typ)
	if err != nil {
		got := ""
		if fromString && raw.Type() == cty.String && raw.IsKnown() && !raw.IsNull() {
			got = fmt.Sprintf(", got %q", raw.AsString())
		}
		return cty.NilVal, fmt.Errorf("a value of type %s is required%s (%s)", typeexpr.TypeString(v.typ), got, err)
	}
	return val, nil
}

// hclExample says how to write a value of a collection or structural type
// on the command line.
func hclExample(name string, t cty.Type) string {
	if t.IsMapType() || t.IsObjectType() {
		return fmt.Sprintf(`write it as { key = "value" }, quoting the whole option in the shell: -var '%s={ key = "value" }'`, name)
	}
	return fmt.Sprintf(`write it as ["a", "b"], with strings in double quotes and the whole option in single quotes in the shell: -var '%s=["a", "b"]'`, name)
}

func (v *variable) validate(base *hcl.EvalContext) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if !v.value.IsWhollyKnown() {
		return nil
	}
	ctx := base.NewChild()
	ctx.Variables = map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{v.name: v.value})}
	for _, r := range v.rules {
		res, ds := r.condition.Value(ctx)
		diags = append(diags, ds...)
		if ds.HasErrors() {
			continue
		}
		res, err := convert.Convert(res, cty.Bool)
		if err != nil || res.IsNull() || !res.IsKnown() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid validation condition",
				Detail:   "The condition must evaluate to true or false.",
				Subject:  r.condition.Range().Ptr(),
			})
			continue
		}
		if res.False() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid value for variable",
				Detail:   fmt.Sprintf("%s\n\nThis was checked by the validation rule at %s.", r.message, rangeString(r.condition.Range())),
				Subject:  subjectOr(v.valRange, v.decl.DefRange),
			})
		}
	}
	return diags
}

// evalLocals evaluates every local value in dependency order into ctx's
// "local" object. A cycle, or a local whose expression fails, leaves the
// locals involved unknown.
func evalLocals(ctx *hcl.EvalContext, locals []*hcl.Attribute, vars map[string]*variable) hcl.Diagnostics {
	var diags hcl.Diagnostics
	byName := map[string]*hcl.Attribute{}
	for _, a := range locals {
		byName[a.Name] = a
	}
	values := map[string]cty.Value{}
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var visit func(a *hcl.Attribute, depth int)
	visit = func(a *hcl.Attribute, depth int) {
		state[a.Name] = visiting
		ok := true
		for _, t := range a.Expr.Variables() {
			if t.RootName() != "local" || len(t) < 2 {
				continue
			}
			dep := byName[attrName(t[1])]
			if dep == nil {
				continue // reported by checkRefs below
			}
			switch state[dep.Name] {
			case visiting:
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Cycle in local values",
					Detail:   fmt.Sprintf("local.%s depends on local.%s, which depends on local.%s again. Break the cycle.", a.Name, dep.Name, a.Name),
					Subject:  t.SourceRange().Ptr(),
				})
				ok = false
			case 0:
				visit(dep, depth+1)
			}
		}
		if ok {
			ok = !appendErrs(&diags, checkRefs(a.Expr, vars, byName))
		}
		if ok {
			ok = !appendErrs(&diags, checkExpr(a.Expr))
		}
		val := cty.DynamicVal
		if ok {
			ctx.Variables["local"] = cty.ObjectVal(values)
			v, ds := a.Expr.Value(ctx)
			if !ds.HasErrors() {
				ds = append(ds, valueSizeDiag(v, a.Expr.Range())...)
			}
			diags = append(diags, ds...)
			if !ds.HasErrors() {
				val = v
			}
		}
		values[a.Name] = val
		state[a.Name] = done
	}
	for _, a := range locals {
		if state[a.Name] == 0 {
			visit(a, 0)
		}
	}
	ctx.Variables["local"] = cty.ObjectVal(values)
	return diags
}

func appendErrs(dst *hcl.Diagnostics, ds hcl.Diagnostics) bool {
	*dst = append(*dst, ds...)
	return ds.HasErrors()
}

// checkRefs reports references to anything but declared variables and
// locals, with messages that name the problem; the expression is not
// evaluated when it has any.
func checkRefs(expr hcl.Expression, vars map[string]*variable, locals map[string]*hcl.Attribute) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, t := range expr.Variables() {
		root := t.RootName()
		switch root {
		case "var", "local":
			if len(t) < 2 {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid reference",
					Detail:   fmt.Sprintf("%q alone is not a value: write %s.NAME.", root, root),
					Subject:  t.SourceRange().Ptr(),
				})
				continue
			}
			name := attrName(t[1])
			if root == "var" {
				if _, ok := vars[name]; !ok {
					diags = append(diags, &hcl.Diagnostic{
						Severity: hcl.DiagError,
						Summary:  "Reference to undeclared input variable",
						Detail:   fmt.Sprintf("An input variable named %q is not declared. Add a variable %q block.", name, name),
						Subject:  t.SourceRange().Ptr(),
					})
				}
			} else if _, ok := locals[name]; !ok {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Reference to undeclared local value",
					Detail:   fmt.Sprintf("A local value named %q is not declared. Add it to a locals block.", name),
					Subject:  t.SourceRange().Ptr(),
				})
			}
		default:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unknown reference",
				Detail:   fmt.Sprintf("%q is not something an expression can refer to: only var.NAME and local.NAME are available.", root),
				Subject:  t.SourceRange().Ptr(),
			})
		}
	}
	return diags
}
