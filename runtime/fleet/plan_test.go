package fleet_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/rpdhq/rpd/runtime/fleet"
)

func mustCron(t *testing.T, expr string) cron.Schedule {
	t.Helper()
	s, err := cron.ParseStandard(expr)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDesiredFollowsSchedulesInTheirTimeZone(t *testing.T) {
	cfg := fleet.Config{MinIdle: 2, Schedules: []fleet.Schedule{
		{Name: "weekdays", Starts: mustCron(t, "CRON_TZ=Europe/Berlin 0 8 * * MON-FRI"), Duration: 10 * time.Hour, MinIdle: 12},
		{Name: "nightly", Starts: mustCron(t, "CRON_TZ=America/New_York 0 22 * * *"), Duration: 2 * time.Hour, MinIdle: 5},
	}}
	for _, c := range []struct {
		at    string // UTC
		n     int
		sched string
	}{
		{"2026-11-23T06:59:00Z", 2, ""},          // Monday 07:59 in Berlin (CET, UTC+1)
		{"2026-11-23T07:00:00Z", 12, "weekdays"}, // 08:00 in Berlin
		{"2026-11-23T16:59:59Z", 12, "weekdays"},
		{"2026-11-23T17:00:00Z", 2, ""},          // 18:00: the 10 h are over
		{"2026-11-24T03:30:00Z", 5, "nightly"},   // 22:30 in New York (EST, UTC-5)
		{"2026-11-28T08:00:00Z", 2, ""},          // Saturday
		{"2026-07-06T06:00:00Z", 12, "weekdays"}, // summer: 08:00 CEST is 06:00 UTC
	} {
		at, _ := time.Parse(time.RFC3339, c.at)
		n, by := cfg.Desired(at)
		if n != c.n || by != c.sched {
			t.Errorf("Desired(%s) = %d, %q; want %d, %q", c.at, n, by, c.n, c.sched)
		}
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	base := fleet.Config{Class: "c", MinIdle: 2, BootTimeout: 5 * time.Minute, OrphanGrace: 10 * time.Minute, MaxLaunch: 3}
	running := func(id string, launched time.Duration) fleet.Instance {
		return fleet.Instance{ID: id, State: "running", Class: "c", LaunchedAt: ago(launched)}
	}
	for _, c := range []struct {
		name string
		cfg  fleet.Config
		in   fleet.Input
		want fleet.Plan
	}{{
		name: "launches the deficit, at most max_launch",
		cfg:  fleet.Config{Class: "c", MinIdle: 5, BootTimeout: time.Minute, OrphanGrace: time.Minute, MaxLaunch: 3},
		in:   fleet.Input{Now: now},
		want: fleet.Plan{Desired: 5, Launch: 3},
	}, {
		name: "scale-down withdraws the oldest idle first, never a claimed one",
		cfg:  fleet.Config{Class: "c", MinIdle: 1, BootTimeout: time.Minute, OrphanGrace: time.Minute, MaxLaunch: 3},
		in: fleet.Input{Now: now, Runners: []fleet.Runner{
			{ID: "a", State: fleet.RunnerIdle, Since: ago(time.Minute)}, {ID: "b", State: fleet.RunnerIdle, Since: ago(time.Hour)},
			{ID: "c", State: fleet.RunnerIdle, Since: ago(10 * time.Minute)}, {ID: "d", State: fleet.RunnerClaimed, Owner: "job"},
		}, Instances: []fleet.Instance{running("a", time.Hour), running("b", time.Hour), running("c", time.Hour), running("d", time.Hour)}},
		want: fleet.Plan{Desired: 1, Idle: 3, Claimed: 1, Withdraw: []fleet.Action{{ID: "b", Reason: fleet.ReasonScaleDown}, {ID: "c", Reason: fleet.ReasonScaleDown}}},
	}, {
		name: "a past threshold is withdrawn and replaced; a vanished idle runner is retired",
		cfg:  base,
		in: fleet.Input{Now: now, Runners: []fleet.Runner{
			{ID: "a", State: fleet.RunnerIdle, Since: ago(time.Minute), Threshold: ago(time.Second)},
			{ID: "b", State: fleet.RunnerIdle, Since: ago(time.Minute)},
			{ID: "gone", State: fleet.RunnerIdle, Since: ago(time.Minute)},
		}, Instances: []fleet.Instance{running("a", time.Hour), running("b", time.Hour), {ID: "gone", State: "terminated", Class: "c"}}},
		want: fleet.Plan{Desired: 2, Idle: 1, Launch: 1, Withdraw: []fleet.Action{{ID: "a", Reason: fleet.ReasonThreshold}},
			Retire: []fleet.Runner{{ID: "gone", State: fleet.RunnerIdle, Since: ago(time.Minute)}}, Vanished: 1},
	}, {
		name: "an unresolved intent counts as booting, and attaches nothing while the cloud lists part of it",
		cfg:  base,
		in: fleet.Input{Now: now, Launches: []fleet.Launch{{ID: "L1", Class: "c", CreatedAt: ago(time.Minute), Count: 2, Claims: []string{"k1", "k2"}}},
			Instances: []fleet.Instance{{ID: "x", State: "pending", Class: "c", Launch: "L1", LaunchedAt: ago(time.Minute)}}},
		want: fleet.Plan{Desired: 2, Booting: 2},
	}, {
		name: "an unresolved intent attaches what carries its tag once the cloud lists all of it",
		cfg:  base,
		in: fleet.Input{Now: now, Launches: []fleet.Launch{{ID: "L1", Class: "c", CreatedAt: ago(time.Minute), Count: 2, Claims: []string{"k1", "k2"}}},
			Instances: []fleet.Instance{{ID: "y", State: "pending", Class: "c", Launch: "L1", LaunchedAt: ago(time.Minute)}, {ID: "x", State: "pending", Class: "c", Launch: "L1", LaunchedAt: ago(time.Minute)}}},
		want: fleet.Plan{Desired: 2, Booting: 2, Attach: map[string][]string{"L1": {"x", "y"}}},
	}, {
		name: "at boot_timeout an intent attaches the part the cloud lists and gives back the other claims",
		cfg:  base,
		in: fleet.Input{Now: now, Runners: []fleet.Runner{{ID: "x", State: fleet.RunnerIdle, Since: ago(time.Minute)}},
			Launches:  []fleet.Launch{{ID: "L1", Class: "c", CreatedAt: ago(6 * time.Minute), Count: 2, Claims: []string{"k1", "k2"}}},
			Instances: []fleet.Instance{{ID: "x", State: "running", Class: "c", Launch: "L1", LaunchedAt: ago(6 * time.Minute)}}},
		want: fleet.Plan{Desired: 2, Idle: 1, Launch: 1, Attach: map[string][]string{"L1": {"x"}}, Offered: []string{"x"}, OfferedAfter: []time.Duration{5 * time.Minute},
			Release: []string{"k2"}, Finished: []string{"L1"}},
	}, {
		name: "an intent that never resolved within boot_timeout gives its claims back",
		cfg:  base,
		in:   fleet.Input{Now: now, Launches: []fleet.Launch{{ID: "L1", Class: "c", CreatedAt: ago(6 * time.Minute), Count: 1, Claims: []string{"k1"}}}},
		want: fleet.Plan{Desired: 2, Launch: 2, Release: []string{"k1"}, Finished: []string{"L1"}},
	}, {
		name: "an orphan is terminated after its grace, not before; a known one never",
		cfg:  fleet.Config{Class: "c", BootTimeout: time.Minute, OrphanGrace: 10 * time.Minute, MaxLaunch: 1},
		in: fleet.Input{Now: now, Known: func(id string) bool { return id == "other-class" },
			Instances: []fleet.Instance{running("old", 11*time.Minute), running("young", 9*time.Minute), running("other-class", time.Hour)}},
		want: fleet.Plan{Terminate: []fleet.Action{{ID: "old", Reason: fleet.ReasonOrphan}}},
	}, {
		name: "an offered VM confirms its claim; a finished launch is deleted",
		cfg:  base,
		in: fleet.Input{Now: now, Runners: []fleet.Runner{{ID: "x", State: fleet.RunnerIdle, Since: ago(time.Minute)}, {ID: "y", State: fleet.RunnerIdle, Since: ago(time.Minute)}},
			Launches:  []fleet.Launch{{ID: "L1", Class: "c", CreatedAt: ago(2 * time.Minute), Count: 2, Done: true, Instances: []string{"x", "y"}, Claims: []string{"k1", "k2"}}},
			Instances: []fleet.Instance{running("x", 2*time.Minute), running("y", 2*time.Minute)}},
		want: fleet.Plan{Desired: 2, Idle: 2, Offered: []string{"x", "y"}, OfferedAfter: []time.Duration{time.Minute, time.Minute}, Finished: []string{"L1"}},
	}} {
		t.Run(c.name, func(t *testing.T) {
			got := fleet.Decide(c.cfg, c.in)
			if c.want.Attach == nil {
				c.want.Attach = map[string][]string{}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}
