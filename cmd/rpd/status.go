package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
)

const statusHelp = `
Prints the status of a running rpd daemon: its configuration version, the
last reload's result (with the error of a rejected configuration), and
tables of its pools, budgets, VM ceilings and runner classes. With -v it
also lists who holds each pool's slots, each budget's permits and each
ceiling's claims (GET /v1/leases), and the requests waiting for each, by
priority. The same is live at the daemon's address in a browser.

The daemon's address is -addr, else RPD_ADDR, else 127.0.0.1:7070; the
bearer token is RPD_TOKEN. Exit status 1 when the daemon cannot be reached,
2 when its last reload failed.
`

func runStatus(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet("status", "[options]", statusHelp)
	addr := fs.String("addr", "", "daemon address HOST:PORT, or several separated by commas (default $RPD_ADDR, else 127.0.0.1:7070)")
	asJSON := fs.Bool("json", false, "print GET /v1/status as JSON (with -v, {\"status\": ..., \"leases\": [...]})")
	verbose := fs.Bool("v", false, "also list the holders and waiters of every pool, budget and ceiling")
	caFile := caFileFlag(fs)
	if code, ok := parseFlags(e, fs, args); !ok {
		return code
	}
	fail := func(err error) int {
		if *asJSON {
			writeJSONError(e.stdout, "rpd status: "+err.Error(), nil)
		} else {
			fmt.Fprintf(e.stderr, "rpd status: %v\n", err)
		}
		return 1
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected argument %q: status takes only options", fs.Arg(0)))
	}
	// Try every address, but answer within seconds when none is up.
	c, err := daemonClient(e, *addr, append(caFileOptions(*caFile), client.WithRetry(3*time.Second))...)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		return fail(unreachable(daemonAddr(e, *addr), err))
	}
	var grants []api.Grant
	if *verbose {
		if grants, err = c.Leases(ctx, client.LeaseFilter{}); err != nil {
			return fail(fmt.Errorf("list the holders: %w", err))
		}
	}
	switch {
	case *asJSON && *verbose:
		b, _ := json.MarshalIndent(struct {
			Status api.Status  `json:"status"`
			Leases []api.Grant `json:"leases"`
		}{st, grants}, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", b)
	case *asJSON:
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", b)
	default:
		writeStatus(e.stdout, st)
		if *verbose {
			writeHolders(e.stdout, grants, st.Priorities, time.Now())
			writeWaiters(e.stdout, st.Components)
		}
	}
	if !st.LastReload.OK {
		return 2
	}
	return 0
}

// writeStatus renders st for humans.
func writeStatus(w io.Writer, st api.Status) {
	fmt.Fprintf(w, "rpd %s, stack %q, up since %s, version %s\n", st.Mode, st.Stack, st.StartedAt.Format(time.RFC3339), st.Version)
	hash := st.ConfigHash
	if len(hash) > 12 {
		hash = hash[:12]
	}
	fmt.Fprintf(w, "Config version %d (hash %s, state version %d)\n", st.ConfigVersion, hash, st.StateVersion)
	switch l := st.Leader; {
	case st.Role == "leader":
		fmt.Fprintf(w, "Role: leader (epoch %d)\n", st.Epoch)
	case l != nil:
		fmt.Fprintf(w, "Role: standby; the leader is %s at %s (epoch %d, since %s)\n", l.Holder, l.Address, l.Epoch, l.Since.Format(time.RFC3339))
	default:
		fmt.Fprintf(w, "Role: standby; no daemon leads the stack right now\n")
	}
	if lv := st.LeaderVersion; lv != nil && *lv != st.Version {
		fmt.Fprintf(w, "WARNING: mixed versions: this daemon runs %s, the leader %s (a rolling update under way, or stuck; docs/operations.md)\n", st.Version, lv)
	}
	if st.Leader != nil && !st.ConfigMatchesLeader {
		fmt.Fprintf(w, "WARNING: this daemon's configuration (hash %s) differs from the leader's; check the files of every replica\n", hash)
	}
	lr := st.LastReload
	if lr.OK {
		fmt.Fprintf(w, "Last reload: ok at %s (%.1f ms)\n", lr.At.Format(time.RFC3339), lr.DurationMS)
	} else {
		fmt.Fprintf(w, "Last reload: REJECTED at %s; version %d stays active:\n%s\n", lr.At.Format(time.RFC3339), lr.ConfigVersion, indent(lr.Error, "  "))
	}
	c := st.Components
	switch {
	case st.Source == api.SourceUnavailable:
		fmt.Fprintf(w, "WARNING: pool, budget and VM ceiling figures unavailable: %s\n", st.SourceError)
	case st.Role != "leader" && st.Leader != nil:
		fmt.Fprintf(w, "Figures: the leader's, fetched from %s\n", st.Leader.Address)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	if st.Source != api.SourceUnavailable {
		fmt.Fprintf(tw, "\nPOOL\tTOTAL\tUSED\tAVAILABLE\tQUEUED\t\n")
	}
	for _, p := range c.Pools {
		fmt.Fprintf(tw, "%s%s\t%d\t%d\t%d\t%d\t\n", p.Name, retained(p.Retained), p.Total, p.Used, p.Available, p.Queued)
	}
	if len(c.Budgets) > 0 {
		fmt.Fprintf(tw, "\nBUDGET\tSCAN RING FREE\tDELTA CACHE FREE\tSPILL FREE\tQUEUED\tPERMITS\t\n")
		for _, b := range c.Budgets {
			spill := "unlimited"
			if !b.SpillSlots.Unlimited {
				spill = fmt.Sprintf("%d/%d", b.SpillSlots.Available, b.SpillSlots.Total)
			}
			fmt.Fprintf(tw, "%s%s\t%s/%s\t%s/%s\t%s\t%d\t%d\t\n", b.Name, retained(b.Retained),
				bytesText(b.ScanRing.Available), bytesText(b.ScanRing.Total), bytesText(b.DeltaCache.Available), bytesText(b.DeltaCache.Total),
				spill, b.Queued, b.Permits)
		}
	}
	if len(c.Ceilings) > 0 {
		fmt.Fprintf(tw, "\nVM CEILING\tMAX\tPROVIDER\tCLAIMS\tEFFECTIVE\tAVAILABLE\tQUEUED\tSTALE\t\n")
		for _, v := range c.Ceilings {
			fmt.Fprintf(tw, "%s%s\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t\n", v.Name, retained(v.Retained), v.Max, v.ProviderActive, v.LocalClaims, v.Effective, v.Available, v.Queued, v.Stale)
		}
	}
	if len(c.Classes) > 0 {
		fmt.Fprintf(tw, "\nRUNNER CLASS\tQUEUE\tMODE\tCLAIMED\tEXHAUSTED\t\n")
		for _, cl := range c.Classes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t\n", cl.Name, cl.Queue, cl.Mode, cl.Outcomes["claimed"], cl.Outcomes["exhausted_global"]+cl.Outcomes["exhausted_local"])
		}
		writeFleets(tw, c.Classes)
	}
}

// writeFleets lists the classes with a fleet: desired idle (and the
// schedule that set it), runners by state, what the ceiling refused, the
// spot snooze, and the last hour's launches and terminations.
func writeFleets(w io.Writer, classes []api.ClassStatus) {
	header := false
	for _, cl := range classes {
		f := cl.Fleet
		if f == nil {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\nFLEET\tDESIRED\tIDLE\tBOOTING\tCLAIMED\tTERMINATING\tREFUSED\tSPOT SNOOZED\tLAST HOUR\t\n")
			header = true
		}
		desired := fmt.Sprint(f.Desired)
		if f.Schedule != "" {
			desired += " (" + f.Schedule + ")"
		}
		snoozed := "-"
		if f.SpotSnoozedUntil != nil {
			snoozed = "until " + f.SpotSnoozedUntil.Local().Format("15:04:05")
		}
		var hour []string
		for _, k := range slices.Sorted(maps.Keys(f.LastHour)) {
			hour = append(hour, fmt.Sprintf("%s %d", k, f.LastHour[k]))
		}
		name := cl.Name
		if !f.Leading {
			name += " (standby)"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", name, desired, f.Idle, f.Booting, f.Claimed, f.Terminating, f.CeilingRefused, snoozed, or(strings.Join(hour, ", "), "-"))
		if e := or(f.LastError, f.LastLaunchError); e != "" {
			fmt.Fprintf(w, "  last error: %s\t\t\t\t\t\t\t\t\t\n", e)
		}
	}
}

func retained(r bool) string {
	if r {
		return " (removed, in use)"
	}
	return ""
}

// bytesText renders n bytes with a binary unit.
func bytesText(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.4g%ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// writeHolders renders the grants of -v: who holds what, and since when.
func writeHolders(w io.Writer, grants []api.Grant, priorities map[string]int, now time.Time) {
	if len(grants) == 0 {
		fmt.Fprintf(w, "\nNo pool slots, budget permits or VM claims are held.\n")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "\nHELD\tBY\tAMOUNT\tPRIORITY\tGRANTED\tHEARTBEAT\tEXPIRES\tID\t\n")
	for _, g := range grants {
		var what, by, amount string
		switch g.Kind {
		case api.KindPool:
			what, by, amount = "pool."+g.Component, g.TaskID, pluralize(g.Slots, "slot")
		case api.KindPermit:
			what, by = "budget."+g.Component, "-"
			amount = bytesText(g.ScanRingBytes) + "+" + bytesText(g.DeltaCacheBytes)
			if g.Spill {
				amount += "+spill"
			}
		case api.KindClaim:
			what, by, amount = "vm_ceiling."+g.Component, g.WorkerID, pluralize(g.VMs, "VM")
			if g.Confirmed {
				amount += ", confirmed"
			}
		}
		switch { // and the principal that took it (docs/security.md)
		case g.Principal != "" && (by == "" || by == "-"):
			by = g.Principal
		case g.Principal != "":
			by += " (" + g.Principal + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", what, or(by, "-"), amount, priorityText(g.Priority, priorities),
			relTime(g.GrantedAt, now), relTime(g.HeartbeatAt, now), relTime(g.ExpiresAt, now), g.ID)
	}
}

// writeWaiters renders the requests waiting in each pool, budget and
// ceiling, by priority (highest, served first, first).
func writeWaiters(w io.Writer, c api.Components) {
	type row struct {
		what string
		q    api.QueuedPriority
	}
	var rows []row
	for _, p := range c.Pools {
		for _, q := range p.QueuedByPriority {
			rows = append(rows, row{"pool." + p.Name, q})
		}
	}
	for _, b := range c.Budgets {
		for _, q := range b.QueuedByPriority {
			rows = append(rows, row{"budget." + b.Name, q})
		}
	}
	for _, v := range c.Ceilings {
		for _, q := range v.QueuedByPriority {
			rows = append(rows, row{"vm_ceiling." + v.Name, q})
		}
	}
	if len(rows) == 0 {
		fmt.Fprintf(w, "\nNothing is waiting.\n")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "\nWAITING FOR\tPRIORITY\tREQUESTS\tSLOTS\tOLDEST\tFIRST TASKS\t\n")
	for _, r := range rows {
		slots, oldest, tasks := "-", "-", "-"
		if r.q.Slots > 0 {
			slots = fmt.Sprint(r.q.Slots)
		}
		if r.q.OldestWaitSeconds > 0 {
			oldest = (time.Duration(r.q.OldestWaitSeconds * float64(time.Second))).Round(time.Second).String()
		}
		if len(r.q.TaskIDs) > 0 {
			tasks = strings.Join(r.q.TaskIDs, ", ")
			if more := r.q.Requests - len(r.q.TaskIDs); more > 0 {
				tasks += fmt.Sprintf(" and %d more", more)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t\n", r.what, priorityText(r.q.Priority, c.Priorities), r.q.Requests, slots, oldest, tasks)
	}
}

// priorityText names a priority weight by the priority blocks that
// declare it: "critical (100)", or the number alone.
func priorityText(weight int, names map[string]int) string {
	var named []string
	for n, w := range names {
		if w == weight {
			named = append(named, n)
		}
	}
	if len(named) == 0 {
		return strconv.Itoa(weight)
	}
	slices.Sort(named)
	return fmt.Sprintf("%s (%d)", strings.Join(named, "/"), weight)
}

// relTime renders t relative to now: "12s ago", "in 48s"; "-" for none.
func relTime(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	d := t.Sub(now).Round(time.Second)
	if d <= 0 {
		return (-d).String() + " ago"
	}
	return "in " + d.String()
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// unreachable turns "connection refused" and other failures to connect
// into a message that says how to start a daemon or point at one.
func unreachable(addr string, err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no rpd daemon at %s (connection refused): start it with `rpd watch DIR`, or pass -addr", addr)
	case errors.As(err, &ne), isDNSError(err):
		return fmt.Errorf("no rpd daemon answering at %s (%w): start it with `rpd watch DIR`, or pass -addr", addr, err)
	}
	return err
}

func isDNSError(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de)
}
