package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/rpdhq/rpd/internal/buildinfo"
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
		return &jsonView{stdout: stdout}
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

// Error prints err; a plan's guard refusals each get their own "Error:",
// as Terraform's diagnostics do.
func (v *humanView) Error(err error) {
	for _, e := range splitJoined(err) {
		fmt.Fprintf(v.stderr, "\n%s %s\n", v.c.bold(v.c.red("Error:")), explain(e))
	}
}

// splitJoined returns the refusals of guards one by one, or err alone.
func splitJoined(err error) []error {
	if r, ok := err.(reconcile.Refusals); ok {
		return r
	}
	return []error{err}
}

// explain is err's message, followed by hint(err) when there is one.
func explain(err error) string {
	if h := hint(err); h != "" {
		return err.Error() + "\n\n" + h
	}
	return err.Error()
}

// hint says what to do about errors that do not say it themselves: a
// backend whose server could not be reached at all.
func hint(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return "rpd could not reach the backend's server: check the network, the region and any AWS_ENDPOINT_URL setting (the emulators: are they running?), then run the command again."
	}
	return ""
}

// jsonView writes one JSON document on stdout: the plan, or the error
// document (writeJSONError) when the command fails, so stdout always parses.
type jsonView struct {
	stdout io.Writer
	// diags are the configuration's diagnostics, reported with the plan
	// (warnings) or in the error document.
	diags []jsonDiagnostic
}

var _ planView = (*jsonView)(nil)

func (v *jsonView) Plan(p *reconcile.Plan) error {
	doc := jsonPlanOf(p)
	doc.Diagnostics = v.diags
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("render the plan as JSON: %w", err)
	}
	_, err = fmt.Fprintf(v.stdout, "%s\n", b)
	return err
}

func (v *jsonView) Saved(string) {}

// Diagnostics takes the configuration's diagnostics (configFlags.load
// calls it); when they hold errors, the command ends there, so it prints
// the error document at once.
func (v *jsonView) Diagnostics(diags hcl.Diagnostics) {
	r := validateJSON(diags)
	v.diags = append(v.diags, r.Diagnostics...)
	if r.ErrorCount > 0 {
		writeJSONError(v.stdout, fmt.Sprintf("the configuration is not valid: %s; see diagnostics", pluralize(r.ErrorCount, "error")), v.diags)
	}
}

func (v *jsonView) Error(err error) {
	for _, e := range splitJoined(err) {
		v.diags = append(v.diags, jsonDiagnostic{Severity: "error", Summary: e.Error(), Detail: hint(e)})
	}
	writeJSONError(v.stdout, explain(err), v.diags)
}

// jsonError is the document every -json command prints on stdout when it
// fails: the error's message, and the diagnostics (configuration errors
// with their ranges, in rpd validate -json's shape; the failure itself).
type jsonError struct {
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
	Diagnostics []jsonDiagnostic `json:"diagnostics"`
}

// writeJSONError writes the jsonError document of msg to w. Without
// diagnostics, the message is the one diagnostic.
func writeJSONError(w io.Writer, msg string, diags []jsonDiagnostic) {
	var doc jsonError
	doc.Error.Message = msg
	doc.Diagnostics = diags
	if len(diags) == 0 {
		doc.Diagnostics = []jsonDiagnostic{{Severity: "error", Summary: msg}}
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	fmt.Fprintf(w, "%s\n", b)
}

// pluralize is "1 error", "2 errors".
func pluralize(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// applyView renders apply's (or destroy's) progress and outcome.
type applyView struct {
	out     io.Writer
	c       colorizer
	destroy bool
	// skippedShown are the addresses whose "Skipped" progress line was
	// printed: the closing table does not list them a second time.
	skippedShown map[reconcile.Address]bool
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
		if v.skippedShown == nil {
			v.skippedShown = map[reconcile.Address]bool{}
		}
		v.skippedShown[e.Address] = true
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
	op, resources := resultLine(r, v.destroy)
	if err == nil {
		fmt.Fprintf(v.out, "\n%s %s\n", v.c.bold(v.c.green(op+" complete!")), resources)
		return
	}
	if len(r.Results) == 0 || !r.Started {
		return // nothing was attempted: the error says why
	}
	fmt.Fprintf(v.out, "\n%s %s %d failed, %d skipped.\n\n", v.c.bold(v.c.red(op+" incomplete!")), resources, failed, skipped)
	width, shown := 0, 0
	for _, c := range r.Results {
		width = max(width, len(c.Address.String()))
	}
	for _, c := range r.Results {
		if c.Status == reconcile.Skipped && v.skippedShown[c.Address] {
			shown++
			continue // its progress line said so, with the reason
		}
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
	if shown > 0 {
		fmt.Fprintf(v.out, "  %s\n", v.c.yellow(fmt.Sprintf("and %s, each listed above with the reason", pluralize(shown, "skipped resource"))))
	}
}

// resultLine is the operation's name and the "Resources: …" count of a
// result, Terraform's way: a destroy counts only what it destroyed, and
// the lease records it removed.
func resultLine(r *reconcile.ApplyResult, destroy bool) (op, resources string) {
	if !destroy {
		return "Apply", fmt.Sprintf("Resources: %d added, %d changed, %d destroyed.", r.Done.Add, r.Done.Change, r.Done.Destroy)
	}
	resources = fmt.Sprintf("Resources: %d destroyed", r.Done.Destroy)
	if r.LeaseRecordsDeleted > 0 {
		resources += fmt.Sprintf(", %s removed", pluralize(r.LeaseRecordsDeleted, "lease record"))
	}
	return "Destroy", resources + "."
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

// applyReporter renders apply's progress and outcome: applyView as text,
// jsonStream as JSON lines.
type applyReporter interface {
	Progress(e reconcile.Event)
	Result(r *reconcile.ApplyResult, err error)
}

var (
	_ applyReporter = (*applyView)(nil)
	_ applyReporter = (*jsonStream)(nil)
	_ planView      = (*jsonStream)(nil)
)

// jsonStream is apply -json: one JSON object per line, in the shape of
// Terraform's machine-readable UI ("@level", "@message", "@timestamp",
// "type" and a body per type), documented in docs/plan.md. Everything,
// errors included, goes to stdout so a consumer reads one stream.
type jsonStream struct {
	out     io.Writer
	now     func() time.Time
	destroy bool // rpd destroy: the closing summary's operation is "destroy"
}

// jsonResource names a resource in a jsonStream message.
type jsonResource struct {
	Addr string `json:"addr"`
	Type string `json:"resource_type"`
	Name string `json:"resource_name"`
}

func jsonResourceOf(a reconcile.Address) jsonResource {
	return jsonResource{Addr: a.String(), Type: string(a.Type), Name: a.Name}
}

// jsonActionName is the single action word of Terraform's streamed UI.
func jsonActionName(a reconcile.Action) string {
	switch a {
	case reconcile.Create:
		return "create"
	case reconcile.Update:
		return "update"
	case reconcile.Delete:
		return "delete"
	case reconcile.DeleteThenCreate:
		return "replace"
	}
	return "noop"
}

// emit writes one message: the common fields and the type's body fields.
func (s *jsonStream) emit(level, typ, msg string, body map[string]any) {
	m := map[string]any{"@level": level, "@message": msg, "@timestamp": s.now().UTC().Format(time.RFC3339Nano), "type": typ}
	for k, v := range body {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil { // values are plain data; this cannot happen
		b, _ = json.Marshal(map[string]string{"@level": "error", "type": "diagnostic", "@message": err.Error()})
	}
	fmt.Fprintf(s.out, "%s\n", b)
}

// Version opens the stream, as Terraform's does.
func (s *jsonStream) Version() {
	v := buildinfo.Read().Version
	s.emit("info", "version", "rpd "+v, map[string]any{"rpd": v, "ui": "1.0"})
}

// Plan streams the drift, each planned change, the warnings and the
// plan's summary.
func (s *jsonStream) Plan(p *reconcile.Plan) error {
	for _, d := range p.Drift {
		act := reconcile.Update
		if d.After == nil {
			act = reconcile.Delete
		}
		s.emit("info", "resource_drift", d.Address.String()+": Drift detected ("+jsonActionName(act)+")",
			map[string]any{"change": map[string]any{"resource": jsonResourceOf(d.Address), "action": jsonActionName(act)}})
	}
	for _, c := range p.Changes {
		if c.Action == reconcile.NoOp {
			continue
		}
		s.emit("info", "planned_change", c.Address.String()+": Plan to "+jsonActionName(c.Action),
			map[string]any{"change": map[string]any{"resource": jsonResourceOf(c.Address), "action": jsonActionName(c.Action)}})
	}
	for _, w := range p.Warnings {
		s.emit("warn", "diagnostic", "Warning: "+w.Summary,
			map[string]any{"diagnostic": map[string]any{"severity": "warning", "summary": w.Summary, "address": w.Address.String()}})
	}
	sum := p.Summary()
	s.emit("info", "change_summary", fmt.Sprintf("Plan: %d to add, %d to change, %d to destroy.", sum.Add, sum.Change, sum.Destroy),
		map[string]any{"changes": map[string]any{"add": sum.Add, "change": sum.Change, "remove": sum.Destroy, "operation": "plan"}})
	return nil
}

func (s *jsonStream) Saved(string) {}

// Diagnostics streams configuration diagnostics with their ranges, in
// the shape of rpd validate -json's.
func (s *jsonStream) Diagnostics(diags hcl.Diagnostics) {
	for _, d := range validateJSON(diags).Diagnostics {
		level := "error"
		if d.Severity == "warning" {
			level = "warn"
		}
		s.emit(level, "diagnostic", strings.ToUpper(d.Severity[:1])+d.Severity[1:]+": "+d.Summary, map[string]any{"diagnostic": d})
	}
}

func (s *jsonStream) Error(err error) {
	for _, e := range splitJoined(err) {
		d := map[string]any{"severity": "error", "summary": e.Error()}
		if h := hint(e); h != "" {
			d["detail"] = h
		}
		s.emit("error", "diagnostic", "Error: "+e.Error(), map[string]any{"diagnostic": d})
	}
}

// Progress streams apply_start, apply_progress, apply_complete,
// apply_errored and (rpd's own) apply_skipped.
func (s *jsonStream) Progress(e reconcile.Event) {
	hook := map[string]any{"resource": jsonResourceOf(e.Address), "action": jsonActionName(e.Action)}
	verb := progressVerbs[e.Action]
	addr := e.Address.String()
	secs := int(e.Elapsed.Round(time.Second) / time.Second)
	switch e.Kind {
	case reconcile.EventStart:
		s.emit("info", "apply_start", addr+": "+verb.ing+"...", map[string]any{"hook": hook})
	case reconcile.EventStill:
		hook["elapsed_seconds"] = secs
		s.emit("info", "apply_progress", fmt.Sprintf("%s: Still %s... [%s elapsed]", addr, verb.still, roundElapsed(e.Elapsed)), map[string]any{"hook": hook})
	case reconcile.EventDone:
		hook["elapsed_seconds"] = secs
		s.emit("info", "apply_complete", fmt.Sprintf("%s: %s complete after %s", addr, verb.noun, roundElapsed(e.Elapsed)), map[string]any{"hook": hook})
	case reconcile.EventFailed:
		hook["elapsed_seconds"] = secs
		msg := fmt.Sprintf("%s: %s errored after %s", addr, verb.noun, roundElapsed(e.Elapsed))
		if e.Err != nil {
			hook["error"] = e.Err.Error()
			msg += ": " + e.Err.Error()
		}
		s.emit("error", "apply_errored", msg, map[string]any{"hook": hook})
	case reconcile.EventSkipped:
		if e.Err != nil {
			hook["reason"] = e.Err.Error()
		}
		s.emit("warn", "apply_skipped", addr+": Skipped", map[string]any{"hook": hook})
	}
}

// Result streams the closing change_summary (operation "apply"); the
// error, if any, follows as a diagnostic from Error.
func (s *jsonStream) Result(r *reconcile.ApplyResult, err error) {
	if err != nil && (len(r.Results) == 0 || !r.Started) {
		return // nothing was attempted: the error says why
	}
	op, resources := resultLine(r, s.destroy)
	msg, level := op+" complete!", "info"
	if err != nil {
		msg, level = op+" incomplete!", "error"
	}
	d := r.Done
	changes := map[string]any{"add": d.Add, "change": d.Change, "remove": d.Destroy, "operation": strings.ToLower(op)}
	if s.destroy {
		changes["lease_records_removed"] = r.LeaseRecordsDeleted
	}
	s.emit(level, "change_summary", msg+" "+resources, map[string]any{"changes": changes})
}
