package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rpdhq/rpd/reconcile"
)

// renderPlanText renders a plan the way terraform plan does: drift first,
// then the changes (destructive ones first) with only the attributes that
// change, the summary line, and warnings.
func renderPlanText(p *reconcile.Plan, c colorizer) string {
	var b strings.Builder
	if len(p.Drift) > 0 {
		b.WriteString("\n" + c.bold("Note: Objects have changed outside of rpd") + "\n\n")
		b.WriteString("rpd detected the following changes made outside of rpd since the last \"rpd apply\":\n\n")
		for _, d := range p.Drift {
			writeDrift(&b, d, c)
		}
		if p.RefreshOnly {
			b.WriteString("This is a refresh-only plan, so rpd will not take any actions to undo these. If you were expecting these changes then you can apply this plan to record the updated values in the rpd state without changing any live objects.\n")
		} else {
			b.WriteString("Unless you have made equivalent changes to your configuration, the actions below undo them.\n")
		}
	}

	changes := make([]reconcile.ResourceChange, 0, len(p.Changes))
	for _, ch := range p.Changes {
		if ch.Action != reconcile.NoOp {
			changes = append(changes, ch)
		}
	}
	// Destructive changes first, so nobody scrolls past a deletion.
	slices.SortStableFunc(changes, func(x, y reconcile.ResourceChange) int {
		dx, dy := x.Action.IsDestructive(), y.Action.IsDestructive()
		switch {
		case dx && !dy:
			return -1
		case dy && !dx:
			return 1
		}
		return 0
	})

	switch {
	case p.RefreshOnly && len(p.Drift) == 0 && len(p.Forget) == 0:
		b.WriteString("\n" + c.bold(c.green("No changes.")) + c.bold(" Your infrastructure still matches the configuration.") + "\n\n")
		b.WriteString("rpd has checked that the real live objects still match the result of your most recent changes, and found no differences.\n")
	case p.RefreshOnly:
		// The drift section above says it all.
	case len(changes) == 0 && p.Destroy && p.LeaseRecords == 0:
		b.WriteString("\n" + c.bold(c.green("No changes.")) + c.bold(" No objects need to be destroyed.") + "\n\n")
		b.WriteString("Either this stack has not created any objects yet, or they were already destroyed.\n")
	case len(changes) == 0 && !p.Destroy:
		b.WriteString("\n" + c.bold(c.green("No changes.")) + c.bold(" Your infrastructure matches the configuration.") + "\n\n")
		b.WriteString("rpd has compared your real infrastructure against your configuration and found no differences, so no changes are needed.\n")
	default:
		b.WriteString("\nrpd used the selected backend to generate the following execution plan. Resource actions are indicated with the following symbols:\n")
		used := map[reconcile.Action]bool{}
		for _, ch := range changes {
			used[ch.Action] = true
		}
		for _, l := range []struct {
			a    reconcile.Action
			text string
		}{
			{reconcile.Create, "create"},
			{reconcile.Update, "update in-place"},
			{reconcile.Delete, "destroy"},
			{reconcile.DeleteThenCreate, "destroy and then create replacement"},
		} {
			if used[l.a] {
				fmt.Fprintf(&b, "%s %s\n", symbol(l.a, c), l.text)
			}
		}
		b.WriteString("\nrpd will perform the following actions:\n\n")
		for _, ch := range changes {
			writeChange(&b, ch, c)
		}
		s := p.Summary()
		fmt.Fprintf(&b, "%s %d to add, %d to change, %d to destroy.\n", c.bold("Plan:"), s.Add, s.Change, s.Destroy)
		if p.Destroy {
			b.WriteString("\nThe runtime document is left empty")
			if n := p.LeaseRecords; n > 0 {
				verb := "are"
				if n == 1 {
					verb = "is"
				}
				fmt.Fprintf(&b, ", and the %s a daemon recorded (pool leases, budget permits, ceiling claims) %s removed", pluralize(n, "lease record"), verb)
			}
			b.WriteString(".\n")
		}
	}

	for _, w := range p.Warnings {
		fmt.Fprintf(&b, "\n%s %s\n", c.bold(c.yellow("Warning:")), w.Summary)
	}
	if len(p.Targets) > 0 {
		targets := make([]string, len(p.Targets))
		for i, t := range p.Targets {
			targets[i] = t.String()
		}
		fmt.Fprintf(&b, "\n%s Resource targeting is in effect (-target %s)\n\n", c.bold(c.yellow("Warning:")), strings.Join(targets, ", -target "))
		b.WriteString("The plan may not be complete: changes to other resources were left out. Use -target only for exceptional situations, not routinely.\n")
	}
	return b.String()
}

// symbol is an action's marker, right-aligned in three columns like
// Terraform's ("  +", "-/+").
func symbol(a reconcile.Action, c colorizer) string {
	s := fmt.Sprintf("%3s", a.Symbol())
	switch a {
	case reconcile.Create:
		return c.green(s)
	case reconcile.Update:
		return c.yellow(s)
	case reconcile.Delete:
		return c.red(s)
	case reconcile.DeleteThenCreate:
		return c.red("-") + "/" + c.green("+")
	}
	return s
}

var headers = map[reconcile.Action]string{
	reconcile.Create:           "will be created",
	reconcile.Update:           "will be updated in-place",
	reconcile.Delete:           "will be destroyed",
	reconcile.DeleteThenCreate: "must be replaced",
}

func writeChange(b *strings.Builder, ch reconcile.ResourceChange, c colorizer) {
	fmt.Fprintf(b, "  %s\n", c.bold(fmt.Sprintf("# %s %s", ch.Address, headers[ch.Action])))
	fmt.Fprintf(b, "%s %s %q {\n", symbol(ch.Action, c), ch.Address.Type, ch.Address.Name)
	forces := map[string]bool{}
	for _, p := range ch.ReplacePaths {
		forces[strings.Join(p, ".")] = true
	}
	switch ch.Action {
	case reconcile.Create:
		writeAll(b, ch.After, reconcile.Create, c)
	case reconcile.Delete:
		writeAll(b, ch.Before, reconcile.Delete, c)
	default:
		writeAttrDiff(b, ch.Before, ch.After, forces, c)
	}
	b.WriteString("    }\n\n")
}

func writeDrift(b *strings.Builder, d reconcile.Drift, c colorizer) {
	if d.After == nil {
		fmt.Fprintf(b, "  %s\n", c.bold(fmt.Sprintf("# %s has been deleted", d.Address)))
		fmt.Fprintf(b, "%s %s %q {\n", symbol(reconcile.Delete, c), d.Address.Type, d.Address.Name)
		writeAll(b, d.Before, reconcile.Delete, c)
	} else {
		fmt.Fprintf(b, "  %s\n", c.bold(fmt.Sprintf("# %s has changed", d.Address)))
		fmt.Fprintf(b, "%s %s %q {\n", symbol(reconcile.Update, c), d.Address.Type, d.Address.Name)
		writeAttrDiff(b, d.Before, d.After, nil, c)
	}
	b.WriteString("    }\n\n")
}

// writeAll writes every non-null attribute of a created or destroyed object.
func writeAll(b *strings.Builder, v reconcile.Values, a reconcile.Action, c colorizer) {
	keys := slices.DeleteFunc(slices.Sorted(maps.Keys(v)), func(k string) bool { return v[k] == nil })
	w := keyWidth(keys)
	for _, k := range keys {
		line := fmt.Sprintf("%-*s = %s", w, k, formatValue(v[k]))
		if a == reconcile.Delete {
			line += " -> null"
		}
		fmt.Fprintf(b, "      %s %s\n", symbolChar(a, c), line)
	}
}

// writeAttrDiff writes only the attributes that change, and how many did not.
func writeAttrDiff(b *strings.Builder, before, after reconcile.Values, forces map[string]bool, c colorizer) {
	keys := reconcile.ChangedAttributes(before, after)
	w := keyWidth(keys)
	for _, k := range keys {
		old, hadOld := before[k]
		nw, hasNew := after[k]
		var line string
		var a reconcile.Action
		switch {
		case hadOld && old != nil && hasNew && nw != nil:
			a, line = reconcile.Update, fmt.Sprintf("%-*s = %s -> %s", w, k, formatValue(old), formatValue(nw))
		case hasNew && nw != nil:
			a, line = reconcile.Create, fmt.Sprintf("%-*s = %s", w, k, formatValue(nw))
		default:
			a, line = reconcile.Delete, fmt.Sprintf("%-*s = %s -> null", w, k, formatValue(old))
		}
		if forces[k] {
			line += " " + c.red("# forces replacement")
		}
		fmt.Fprintf(b, "      %s %s\n", symbolChar(a, c), line)
	}
	if n := len(unionKeys(before, after)) - len(keys); n > 0 {
		noun := "attributes"
		if n == 1 {
			noun = "attribute"
		}
		fmt.Fprintf(b, "        %s\n", c.wrap("2", fmt.Sprintf("# (%d unchanged %s hidden)", n, noun)))
	}
}

func unionKeys(a, b reconcile.Values) map[string]bool {
	u := map[string]bool{}
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

func symbolChar(a reconcile.Action, c colorizer) string {
	switch a {
	case reconcile.Create:
		return c.green("+")
	case reconcile.Delete:
		return c.red("-")
	}
	return c.yellow("~")
}

func keyWidth(keys []string) int {
	w := 0
	for _, k := range keys {
		w = max(w, len(k))
	}
	return w
}

// formatValue renders an attribute value in HCL-like syntax: strings
// quoted, lists in brackets, maps in braces.
func formatValue(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case []string:
		parts := make([]string, len(t))
		for i, s := range t {
			parts[i] = formatValue(s)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []any:
		parts := make([]string, len(t))
		for i, s := range t {
			parts[i] = formatValue(s)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]string:
		parts := make([]string, 0, len(t))
		for _, k := range slices.Sorted(maps.Keys(t)) {
			parts = append(parts, formatValue(k)+" = "+formatValue(t[k]))
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	case map[string]any:
		parts := make([]string, 0, len(t))
		for _, k := range slices.Sorted(maps.Keys(t)) {
			parts = append(parts, formatValue(k)+" = "+formatValue(t[k]))
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
