package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/rpdhq/rpd/reconcile"
)

// planView renders what plan, apply and show have to say about a plan.
// There are two implementations: humanView (text with Terraform's symbols)
// and jsonView (one machine-readable document).
type planView interface {
	// Plan renders the plan: drift, changes, warnings and the summary.
	Plan(p *reconcile.Plan) error
	// Saved tells where a plan was saved (plan -out).
	Saved(path string)
	// Error reports a failure of the command.
	Error(err error)
}

// newPlanView picks the view for -json or text.
func newPlanView(asJSON bool, stdout, stderr io.Writer, color bool) planView {
	if asJSON {
		return &jsonView{stdout: stdout, stderr: stderr}
	}
	return &humanView{stdout: stdout, stderr: stderr, c: colorizer(color)}
}

// humanView writes text for people.
type humanView struct {
	stdout, stderr io.Writer
	c              colorizer
}

var _ planView = (*humanView)(nil)

func (v *humanView) Plan(p *reconcile.Plan) error {
	_, err := io.WriteString(v.stdout, renderPlanText(p, v.c))
	return err
}

func (v *humanView) Saved(path string) {
	fmt.Fprintf(v.stdout, "\nSaved the plan to: %s\n\nTo perform exactly these actions, run the following command to apply:\n    rpd apply %q\n", path, path)
}

func (v *humanView) Error(err error) {
	fmt.Fprintf(v.stderr, "\n%s %s\n", v.c.bold(v.c.red("Error:")), err)
}

// jsonView writes one JSON document on stdout; errors go to stderr as a
// JSON object too, so stdout stays parseable.
type jsonView struct {
	stdout, stderr io.Writer
}

var _ planView = (*jsonView)(nil)

func (v *jsonView) Plan(p *reconcile.Plan) error {
	b, err := json.MarshalIndent(jsonPlanOf(p), "", "  ")
	if err != nil {
		return fmt.Errorf("render the plan as JSON: %w", err)
	}
	_, err = fmt.Fprintf(v.stdout, "%s\n", b)
	return err
}

func (v *jsonView) Saved(string) {}

func (v *jsonView) Error(err error) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"message": err.Error()}})
	fmt.Fprintf(v.stderr, "%s\n", b)
}

// applyView renders apply's progress and outcome.
type applyView struct {
	out io.Writer
	c   colorizer
}

// Progress prints one progress line per event, Terraform's way.
func (v *applyView) Progress(e reconcile.Event) {
	verb := progressVerbs[e.Action]
	addr := v.c.bold(e.Address.String())
	switch e.Kind {
	case reconcile.EventStart:
		fmt.Fprintf(v.out, "%s: %s...\n", addr, verb.ing)
	case reconcile.EventStill:
		fmt.Fprintf(v.out, "%s: Still %s... [%s elapsed]\n", addr, verb.still, roundElapsed(e.Elapsed))
	case reconcile.EventDone:
		fmt.Fprintf(v.out, "%s: %s complete after %s\n", addr, verb.noun, roundElapsed(e.Elapsed))
	case reconcile.EventFailed:
		fmt.Fprintf(v.out, "%s: %s after %s\n", addr, v.c.red(verb.noun+" failed"), roundElapsed(e.Elapsed))
	case reconcile.EventSkipped:
		fmt.Fprintf(v.out, "%s: %s\n", addr, v.c.yellow("Skipped: "+e.Err.Error()))
	}
}

type verbs struct{ ing, still, noun string }

var progressVerbs = map[reconcile.Action]verbs{
	reconcile.Create:           {"Creating", "creating", "Creation"},
	reconcile.Update:           {"Modifying", "modifying", "Modifications"},
	reconcile.Delete:           {"Destroying", "destroying", "Destruction"},
	reconcile.DeleteThenCreate: {"Replacing", "replacing", "Replacement"},
}

// roundElapsed is the elapsed time as Terraform prints it: whole seconds
// below a minute ("1s", "10s"), else "1m10s".
func roundElapsed(d time.Duration) string {
	return reconcile.Duration(d.Round(time.Second)).String()
}

// Result prints the closing summary, and when something did not apply, a
// table of every change's outcome.
func (v *applyView) Result(r *reconcile.ApplyResult, err error) {
	var failed, skipped int
	for _, c := range r.Results {
		switch c.Status {
		case reconcile.Failed:
			failed++
		case reconcile.Skipped, "":
			skipped++
		}
	}
	resources := fmt.Sprintf("Resources: %d added, %d changed, %d destroyed.", r.Done.Add, r.Done.Change, r.Done.Destroy)
	if err == nil {
		fmt.Fprintf(v.out, "\n%s %s\n", v.c.bold(v.c.green("Apply complete!")), resources)
		return
	}
	if len(r.Results) == 0 || !r.Started {
		return // nothing was attempted: the error says why
	}
	fmt.Fprintf(v.out, "\n%s %s %d failed, %d skipped.\n\n", v.c.bold(v.c.red("Apply incomplete!")), resources, failed, skipped)
	width := 0
	for _, c := range r.Results {
		width = max(width, len(c.Address.String()))
	}
	for _, c := range r.Results {
		status := string(c.Status)
		if status == "" {
			status = string(reconcile.Skipped)
		}
		line := fmt.Sprintf("  %-*s  %-9s", width, c.Address, status)
		if c.Err != nil && c.Status != reconcile.Succeeded {
			line += "  " + c.Err.Error()
		}
		switch c.Status {
		case reconcile.Failed:
			line = v.c.red(line)
		case reconcile.Skipped:
			line = v.c.yellow(line)
		}
		fmt.Fprintln(v.out, line)
	}
}

// colorizer wraps text in ANSI colours, or leaves it alone when disabled.
type colorizer bool

func (c colorizer) wrap(code, s string) string {
	if !c {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (c colorizer) bold(s string) string   { return c.wrap("1", s) }
func (c colorizer) red(s string) string    { return c.wrap("31", s) }
func (c colorizer) green(s string) string  { return c.wrap("32", s) }
func (c colorizer) yellow(s string) string { return c.wrap("33", s) }
