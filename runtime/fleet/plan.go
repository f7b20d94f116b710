package fleet

import (
	"slices"
	"strings"
	"time"
)

// RunnerState is a runner's state in the class's inventory (the instance
// table): the pickup package's states plus terminating.
type RunnerState string

// Inventory states the engine reads.
const (
	RunnerIdle        RunnerState = "idle"
	RunnerClaimed     RunnerState = "claimed"
	RunnerTerminating RunnerState = "terminating"
	RunnerRetired     RunnerState = "retired"
)

// Runner is one record of a class's inventory.
type Runner struct {
	ID    string
	State RunnerState
	// Since is when the record last changed state: for an idle runner,
	// when it offered itself (or was released).
	Since     time.Time
	Threshold time.Time // an idle runner's message expires then; zero: never
	Owner     string    // a claimed runner's claimant
}

// Instance states EC2 reports.
const (
	InstancePending      = "pending"
	InstanceRunning      = "running"
	InstanceShuttingDown = "shutting-down"
	InstanceTerminated   = "terminated"
	InstanceStopping     = "stopping"
	InstanceStopped      = "stopped"
)

// Instance is one VM the cloud reports, tagged with the stack.
type Instance struct {
	ID         string
	State      string // Instance* constants
	LaunchedAt time.Time
	Class      string // its rpd:class tag ("" if none)
	Launch     string // its rpd:launch tag ("" if none)
	Lifecycle  string // Spot or OnDemand
	Type       string // instance type
}

// live reports whether the instance runs or is about to (it counts
// against the ceiling and bills).
func (i Instance) live() bool { return i.State == InstancePending || i.State == InstanceRunning }

// Launch is a launch intent: recorded (fenced by the leader's epoch) before
// the cloud is asked, so a leader that dies mid-launch leaves it to its
// successor, which finds the VMs by the intent's tag instead of launching
// again.
type Launch struct {
	ID        string    `json:"id"`
	Class     string    `json:"class"`
	CreatedAt time.Time `json:"created_at"`
	// Count VMs were claimed on the ceiling and asked for.
	Count int `json:"count"`
	// Claims are the ceiling claims of the VMs: Claims[i] covers
	// Instances[i]; once Done, the unused ones were released.
	Claims []string `json:"claims,omitempty"`
	// Done: the cloud answered; Instances are the VMs it started.
	Done      bool     `json:"done,omitempty"`
	Instances []string `json:"instances,omitempty"`
	Lifecycle string   `json:"lifecycle,omitempty"`
	Epoch     int64    `json:"epoch,omitempty"`
}

// Reason says why a VM is terminated.
type Reason string

// Termination reasons (docs/fleet.md); the metrics label
// rpd_fleet_terminated_total by them.
const (
	ReasonScaleDown   Reason = "scale_down"   // idle (or booting) above the desired count
	ReasonMaxIdleAge  Reason = "max_idle_age" // idle longer than max_idle_age
	ReasonThreshold   Reason = "threshold"    // the runner's own threshold passed
	ReasonBootTimeout Reason = "boot_timeout" // launched, never offered itself
	ReasonOrphan      Reason = "orphan"       // tagged with the stack, unknown to rpd
	ReasonRetired     Reason = "retired"      // released for good by its claimant, still running
	ReasonRetry       Reason = "retry"        // a termination that did not complete, asked again
)

// Reasons lists every termination reason.
func Reasons() []Reason {
	return []Reason{ReasonScaleDown, ReasonMaxIdleAge, ReasonThreshold, ReasonBootTimeout, ReasonOrphan, ReasonRetired, ReasonRetry}
}

// Action is one VM to act on, and why.
type Action struct {
	ID     string
	Reason Reason
}

// Input is what the engine decides from: one class's inventory and intents
// and the cloud's view, at Now.
type Input struct {
	Now      time.Time
	Runners  []Runner
	Launches []Launch
	// Instances are the stack's VMs the cloud reports (every state),
	// those of other classes included: an instance is matched to this
	// class by its tag, by its record, or by a launch of this class.
	Instances []Instance
	// Known reports whether an instance ID is known to rpd outside this
	// class (a record of another class, a launch of another class): such
	// an instance is never an orphan here.
	Known func(id string) bool
	// Seen reports whether an instance was seen with the stack's tag
	// before: a record whose instance is missing from the cloud's answer
	// then vanished (a record of an instance never seen may be a runner
	// rpd does not launch).
	Seen func(id string) bool
}

// Plan is the engine's decision for one class: inert data, carried out by
// the Reconciler (or a simulation).
type Plan struct {
	Desired  int
	Schedule string // the schedule that set Desired; "" for the base min_idle
	// Counts before the plan is carried out.
	Idle, Booting, Claimed, Terminating int
	// Launch VMs now (after the ceiling's claims).
	Launch int
	// Withdraw are idle runners to take out of the pool (idle →
	// terminating, message deleted) and then terminate.
	Withdraw []Action
	// Terminate are VMs to terminate directly: booting ones, orphans,
	// retired runners still running, and terminations to retry.
	Terminate []Action
	// Retire are records whose instance is gone (vanished) or whose
	// termination completed: their record becomes retired.
	Retire []Runner
	// Vanished counts the Retire entries that were idle or claimed (a
	// spot interruption, a VM terminated out of band).
	Vanished int
	// Attach maps a launch ID to the instances the cloud reports with its
	// tag (an intent left by a leader that died mid-launch), once it
	// reports all of them or the intent is boot_timeout old.
	Attach map[string][]string
	// Offered are the instances of launches that have offered themselves
	// since: their claims are confirmed. OfferedAfter is how long each took.
	Offered      []string
	OfferedAfter []time.Duration
	// Release are the claims to give back: VMs never launched or
	// terminated before they offered themselves.
	Release []string
	// Finished are launches whose every VM offered itself or is gone:
	// their intent is deleted. Dropped are launches that never resolved
	// within boot_timeout.
	Finished []string
}

// Decide is the engine: it turns one class's inventory, intents and cloud
// view at in.Now into a Plan. It is a pure function of its arguments.
//
// Invariants (property_test.go): a claimed runner is never in Withdraw or
// Terminate; Launch never exceeds the deficit below Desired nor
// Config.MaxLaunch; a runner is withdrawn only while idle in the input.
func Decide(cfg Config, in Input) Plan {
	now := in.Now
	p := Plan{Attach: map[string][]string{}}
	p.Desired, p.Schedule = cfg.Desired(now)

	cloud := make(map[string]Instance, len(in.Instances))
	for _, i := range in.Instances {
		cloud[i.ID] = i
	}
	records := make(map[string]Runner, len(in.Runners))
	for _, r := range in.Runners {
		records[r.ID] = r
	}
	known := func(id string) bool { return in.Known != nil && in.Known(id) }
	seen := func(id string) bool { return in.Seen != nil && in.Seen(id) }
	gone := func(id string) bool {
		i, ok := cloud[id]
		if !ok {
			return seen(id)
		}
		return !i.live()
	}

	// Launch intents: attach what the cloud shows for unresolved ones,
	// find which VMs offered themselves, which are still booting.
	byLaunch := map[string][]string{}
	for _, i := range in.Instances {
		if i.Launch != "" {
			byLaunch[i.Launch] = append(byLaunch[i.Launch], i.ID)
		}
	}
	ours := map[string]bool{} // instances of this class's launches
	type bootingVM struct {
		id    string
		since time.Time
		claim string
	}
	var booting []bootingVM
	pending := 0 // VMs asked for whose IDs are not known yet
	for _, l := range in.Launches {
		ids := l.Instances
		if !l.Done {
			ids = slices.Clone(byLaunch[l.ID])
			slices.Sort(ids)
			// Attached once the cloud lists every VM asked for, or at
			// boot_timeout whatever it lists: a fleet's VMs may be listed
			// one by one while the dead leader's call still runs, so a
			// partial list is not the call's answer (the VMs not yet
			// listed stay pending, and nothing is launched for them).
			if len(ids) > 0 && (len(ids) >= l.Count || now.Sub(l.CreatedAt) >= cfg.BootTimeout) {
				p.Attach[l.ID] = ids
			}
		}
		resolved := true
		for k, id := range ids {
			ours[id] = true
			claim := ""
			if k < len(l.Claims) {
				claim = l.Claims[k]
			}
			r, offered := records[id]
			switch {
			case offered:
				if r.State == RunnerIdle || r.State == RunnerClaimed {
					p.Offered = append(p.Offered, id)
					launched := l.CreatedAt
					if i, ok := cloud[id]; ok && !i.LaunchedAt.IsZero() {
						launched = i.LaunchedAt
					}
					p.OfferedAfter = append(p.OfferedAfter, max(r.Since.Sub(launched), 0))
				}
			case gone(id):
				if claim != "" {
					p.Release = append(p.Release, claim)
				}
			default:
				resolved = false
				since := l.CreatedAt
				if i, ok := cloud[id]; ok && !i.LaunchedAt.IsZero() && i.LaunchedAt.After(since) {
					since = i.LaunchedAt
				}
				booting = append(booting, bootingVM{id: id, since: since, claim: claim})
			}
		}
		if !l.Done {
			if now.Sub(l.CreatedAt) < cfg.BootTimeout {
				pending += max(l.Count-len(ids), 0)
				resolved = false
			} else {
				// Never resolved within boot_timeout: what it did not start
				// never will be, and its claims go back.
				for k := len(ids); k < len(l.Claims); k++ {
					p.Release = append(p.Release, l.Claims[k])
				}
			}
		}
		if resolved {
			p.Finished = append(p.Finished, l.ID)
		}
	}

	// The inventory.
	var idle []Runner
	for _, r := range in.Runners {
		switch r.State {
		case RunnerIdle:
			switch {
			case gone(r.ID):
				p.Retire = append(p.Retire, r)
				p.Vanished++
			case !r.Threshold.IsZero() && !r.Threshold.After(now):
				p.Withdraw = append(p.Withdraw, Action{r.ID, ReasonThreshold})
			case cfg.MaxIdleAge > 0 && now.Sub(r.Since) >= cfg.MaxIdleAge:
				p.Withdraw = append(p.Withdraw, Action{r.ID, ReasonMaxIdleAge})
			default:
				idle = append(idle, r)
			}
		case RunnerClaimed:
			p.Claimed++
			if gone(r.ID) {
				p.Retire = append(p.Retire, r)
				p.Vanished++
			}
		case RunnerTerminating:
			p.Terminating++
			if gone(r.ID) || !inCloud(cloud, r.ID) {
				p.Retire = append(p.Retire, r)
			} else {
				p.Terminate = append(p.Terminate, Action{r.ID, ReasonRetry})
			}
		case RunnerRetired:
			if i, ok := cloud[r.ID]; ok && i.live() && (i.Class == cfg.Class || ours[r.ID]) {
				p.Terminate = append(p.Terminate, Action{r.ID, ReasonRetired})
			}
		}
	}
	p.Idle = len(idle)

	// Booting VMs past boot_timeout are terminated; the others count.
	var young []bootingVM
	for _, b := range booting {
		if now.Sub(b.since) >= cfg.BootTimeout {
			p.Terminate = append(p.Terminate, Action{b.id, ReasonBootTimeout})
			if b.claim != "" {
				p.Release = append(p.Release, b.claim)
			}
			continue
		}
		young = append(young, b)
	}
	p.Booting = len(young) + pending

	// Scale: launch the deficit, or take the surplus down, idle runners
	// oldest first, then the youngest booting VMs (not yet useful, and
	// billing).
	live := len(idle) + len(young) + pending
	switch {
	case live < p.Desired:
		p.Launch = min(p.Desired-live, max(cfg.MaxLaunch, 0))
	case live > p.Desired:
		surplus := live - p.Desired
		slices.SortStableFunc(idle, func(a, b Runner) int {
			if c := a.Since.Compare(b.Since); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		for _, r := range idle {
			if surplus == 0 {
				break
			}
			p.Withdraw = append(p.Withdraw, Action{r.ID, ReasonScaleDown})
			surplus--
		}
		slices.SortStableFunc(young, func(a, b bootingVM) int { return b.since.Compare(a.since) })
		for _, b := range young {
			if surplus == 0 {
				break
			}
			p.Terminate = append(p.Terminate, Action{b.id, ReasonScaleDown})
			if b.claim != "" {
				p.Release = append(p.Release, b.claim)
			}
			surplus--
		}
	}

	// Orphans: live VMs tagged with this class that no record, no launch
	// of this class and nothing elsewhere in rpd knows, past the grace.
	for _, i := range in.Instances {
		if i.Class != cfg.Class || !i.live() || ours[i.ID] || known(i.ID) {
			continue
		}
		if _, ok := records[i.ID]; ok {
			continue
		}
		if i.Launch != "" && launchOf(in.Launches, i.Launch) {
			continue
		}
		if !i.LaunchedAt.IsZero() && now.Sub(i.LaunchedAt) >= cfg.OrphanGrace {
			p.Terminate = append(p.Terminate, Action{i.ID, ReasonOrphan})
		}
	}
	return p
}

// Orphans returns the live instances tagged with the stack but with no
// fleet class (no rpd:class tag, or a class without a fleet) that nothing
// in rpd knows, older than grace: the stack-level orphans, which no class's
// Decide sees.
func Orphans(instances []Instance, fleetClass func(string) bool, known func(string) bool, grace time.Duration, now time.Time) []Action {
	var out []Action
	for _, i := range instances {
		if !i.live() || (i.Class != "" && fleetClass(i.Class)) || known(i.ID) {
			continue
		}
		if !i.LaunchedAt.IsZero() && now.Sub(i.LaunchedAt) >= grace {
			out = append(out, Action{i.ID, ReasonOrphan})
		}
	}
	return out
}

func inCloud(cloud map[string]Instance, id string) bool {
	_, ok := cloud[id]
	return ok
}

func launchOf(ls []Launch, id string) bool {
	return slices.ContainsFunc(ls, func(l Launch) bool { return l.ID == id })
}
