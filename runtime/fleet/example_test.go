package fleet_test

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/rpdhq/rpd/runtime/fleet"
)

// Decide turns a class's inventory and the cloud's list into a plan: here
// the weekday schedule wants 4 idle runners, one is idle, one boots, one
// idle runner is past max_idle_age and one VM never offered itself.
func ExampleDecide() {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	weekdays, _ := cron.ParseStandard("CRON_TZ=Europe/Berlin 0 8 * * MON-FRI")
	cfg := fleet.Config{
		Class: "medium", MinIdle: 1, MaxIdleAge: 30 * time.Minute, BootTimeout: 5 * time.Minute, OrphanGrace: 10 * time.Minute, MaxLaunch: 10,
		Schedules: []fleet.Schedule{{Name: "weekdays", Starts: weekdays, Duration: 10 * time.Hour, MinIdle: 4}},
	}
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, berlin) // a Monday, 09:00 in Berlin
	in := fleet.Input{
		Now: now,
		Runners: []fleet.Runner{
			{ID: "i-idle", State: fleet.RunnerIdle, Since: now.Add(-10 * time.Minute)},
			{ID: "i-old", State: fleet.RunnerIdle, Since: now.Add(-40 * time.Minute)},
			{ID: "i-busy", State: fleet.RunnerClaimed, Owner: "job-7"},
		},
		Launches: []fleet.Launch{{ID: "L1", Class: "medium", CreatedAt: now.Add(-8 * time.Minute), Count: 2, Done: true,
			Instances: []string{"i-boot", "i-stuck"}, Claims: []string{"c1", "c2"}}},
		Instances: []fleet.Instance{
			{ID: "i-idle", State: "running", Class: "medium"}, {ID: "i-old", State: "running", Class: "medium"},
			{ID: "i-busy", State: "running", Class: "medium"},
			{ID: "i-boot", State: "running", Class: "medium", Launch: "L1", LaunchedAt: now.Add(-2 * time.Minute)},
			{ID: "i-stuck", State: "running", Class: "medium", Launch: "L1", LaunchedAt: now.Add(-8 * time.Minute)},
		},
	}
	p := fleet.Decide(cfg, in)
	fmt.Printf("desired %d (schedule %q): idle %d, booting %d, claimed %d\n", p.Desired, p.Schedule, p.Idle, p.Booting, p.Claimed)
	fmt.Println("launch", p.Launch)
	fmt.Println("withdraw", p.Withdraw)
	fmt.Println("terminate", p.Terminate)
	fmt.Println("release claims", p.Release)
	// Output:
	// desired 4 (schedule "weekdays"): idle 1, booting 1, claimed 1
	// launch 2
	// withdraw [{i-old max_idle_age}]
	// terminate [{i-stuck boot_timeout}]
	// release claims [c2]
}
