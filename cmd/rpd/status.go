package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/rpdhq/rpd/api"
)

const statusHelp = `
Prints the status of a running rpd daemon: its configuration version, the
last reload's result (with the error of a rejected configuration), and
tables of its pools, budgets, VM ceilings and runner classes.

The daemon's address is -addr, else RPD_ADDR, else 127.0.0.1:7070; the
bearer token is RPD_TOKEN. Exit status 1 when the daemon cannot be reached,
2 when its last reload failed.
`

func runStatus(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet("status", "[options]", statusHelp)
	addr := fs.String("addr", "", "daemon address HOST:PORT (default $RPD_ADDR, else 127.0.0.1:7070)")
	asJSON := fs.Bool("json", false, "print GET /v1/status as JSON")
	if code, ok := parseFlags(e, fs, args); !ok {
		return code
	}
	c, err := daemonClient(e, *addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "rpd status: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		fmt.Fprintf(e.stderr, "rpd status: %v\n", err)
		return 1
	}
	if *asJSON {
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", b)
	} else {
		writeStatus(e.stdout, st)
	}
	if !st.LastReload.OK {
		return 2
	}
	return 0
}

// writeStatus renders st for humans.
func writeStatus(w io.Writer, st api.Status) {
	fmt.Fprintf(w, "rpd %s, stack %q, up since %s\n", st.Mode, st.Stack, st.StartedAt.Format(time.RFC3339))
	hash := st.ConfigHash
	if len(hash) > 12 {
		hash = hash[:12]
	}
	fmt.Fprintf(w, "Config version %d (hash %s, state version %d)\n", st.ConfigVersion, hash, st.StateVersion)
	lr := st.LastReload
	if lr.OK {
		fmt.Fprintf(w, "Last reload: ok at %s (%.1f ms)\n", lr.At.Format(time.RFC3339), lr.DurationMS)
	} else {
		fmt.Fprintf(w, "Last reload: REJECTED at %s; version %d stays active:\n%s\n", lr.At.Format(time.RFC3339), lr.ConfigVersion, indent(lr.Error, "  "))
	}
	c := st.Components
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "\nPOOL\tTOTAL\tUSED\tAVAILABLE\tQUEUED\t\n")
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
