package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/daemon/internal/security"
	"github.com/rpdhq/rpd/internal/ec2test"
	"github.com/rpdhq/rpd/internal/waitfor"
)

func fleetBody(minIdle int) string {
	return fmt.Sprintf(`
vm_ceiling "aws" {
  max           = 5
  poll_interval = "1s"
  stale_after   = "5s"
  claim_ttl     = "30s"
  grant         = "immediate"
  usage "ec2" {}
}

runner_class "medium" {
  cpu            = 2
  mem            = "4GiB"
  instance_types = ["c6i.large"]
  fleet {
    launch_template = "runner"
    usage_class     = "spot"
    fallback        = "on-demand"
    vm_ceiling      = "aws"
    min_idle        = %d
    boot_timeout    = "1m"
    interval        = "1s"
  }
}
`, minIdle)
}

// waitFleet polls the class's fleet status every 100 ms for up to 30 s
// until cond holds.
func waitFleet(t *testing.T, td *testDaemon, what string, cond func(*api.FleetStatus) bool) *api.FleetStatus {
	t.Helper()
	var last *api.FleetStatus
	waitfor.Paced(t, 30*time.Second, 100*time.Millisecond, what, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cl, err := td.c.Class(ctx, "medium")
		if err != nil || cl.Fleet == nil {
			return false
		}
		last = cl.Fleet
		return cond(last)
	})
	return last
}

// A spot fleet without spot capacity falls back to on-demand and snoozes
// spot; an offer turns a booting runner idle; a pickup wakes the fleet,
// which replaces the claimed runner; min_idle 0 takes every runner but the
// claimed one down. Status and metrics say so at each step.
func TestFleetSpotFallbackStatusMetrics(t *testing.T) {
	moto := ec2test.Start(t)
	ec2test.CreateLaunchTemplate(t, moto, "runner")
	proxy := ec2test.NewProxy(t, moto)
	proxy.SpotCapacity(0)
	for _, kv := range ec2test.Env(proxy.URL) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	td := startDaemon(t, fleetBody(2))

	st := waitFleet(t, td, "2 on-demand VMs after the spot capacity error", func(f *api.FleetStatus) bool { return f.Launched["on-demand"] == 2 })
	if st.LaunchErrors["InsufficientInstanceCapacity"] == 0 || st.SpotSnoozedUntil == nil || st.Launched["spot"] != 0 || st.Desired != 2 || !st.Leading {
		t.Fatalf("fleet status %+v; want the capacity error counted, spot snoozed, nothing on spot", st)
	}
	live := ec2test.Live(t, moto, "t", map[string]string{"rpd:class": "medium"})
	if len(live) != 2 {
		t.Fatalf("%d VMs run; want 2", len(live))
	}
	var ids []string
	for id := range live {
		ids = append(ids, id)
	}

	// The first runner boots and offers itself.
	body := fmt.Sprintf(`{"instance_id":%q,"usage_class":"on-demand","instance_type":"c6i.large","cpu":2,"mem":4096,"resource_class":"medium","threshold":%q}`,
		ids[0], time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if code, out := td.raw(t, http.MethodPost, "/v1/classes/medium/instances", body); code != http.StatusOK {
		t.Fatalf("offer: %d %s", code, out)
	}
	waitFleet(t, td, "1 idle and 1 booting", func(f *api.FleetStatus) bool { return f.Idle == 1 && f.Booting == 1 })
	// The claims of the launched VMs are the fleet's: no worker ends them.
	all, _ := httpapi.PageBounds[api.Grant](nil)
	_ = td.d.arb.Grants(url.Values{"kind": {api.KindClaim}}, &all)
	for _, g := range all.Out {
		if g.Principal != security.FleetPrincipal.Owner() {
			t.Errorf("the fleet's claim %s is held by %q; want %s", g.ID, g.Principal, security.FleetPrincipal.Owner())
		}
	}

	_, metrics := td.raw(t, http.MethodGet, "/metrics", "")
	for _, want := range []string{
		`rpd_fleet_desired_idle{class="medium",schedule=""} 2`,
		`rpd_fleet_runners{class="medium",state="idle"} 1`,
		`rpd_fleet_runners{class="medium",state="booting"} 1`,
		`rpd_fleet_launched_total{class="medium",lifecycle="on-demand"} 2`,
		`rpd_fleet_launch_errors_total{class="medium",code="InsufficientInstanceCapacity"}`,
		`rpd_fleet_spot_snoozed{class="medium"} 1`,
		`rpd_fleet_launch_to_offer_seconds_count{class="medium"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// A pickup claims the idle runner: the fleet launches a replacement.
	code, out := td.raw(t, http.MethodPost, "/v1/classes/medium/pickup", `{"worker_id":"job-1","usage_class":"on-demand"}`)
	if code != http.StatusOK || !strings.Contains(out, ids[0]) {
		t.Fatalf("pickup: %d %s; want %s", code, out, ids[0])
	}
	waitFleet(t, td, "the claimed runner replaced", func(f *api.FleetStatus) bool { return f.Claimed == 1 && f.Launched["on-demand"] == 3 })

	// min_idle 0: every runner but the claimed one goes.
	td.edit(t, fleetBody(0))
	for range 300 {
		if live = ec2test.Live(t, moto, "t", nil); len(live) == 1 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, ok := live[ids[0]]; len(live) != 1 || !ok {
		t.Fatalf("with min_idle 0, %v run; want only the claimed %s", live, ids[0])
	}
	st = waitFleet(t, td, "the scale-down counted", func(f *api.FleetStatus) bool { return f.Terminated["scale_down"] == 2 })
	if st.LastHour["scale_down"] != 2 || st.LastHour["launch"] != 3 {
		t.Errorf("last hour %v; want 3 launches and 2 scale-downs", st.LastHour)
	}
}

// An idle runner whose VM is terminated out of band (a spot interruption)
// is retired, its message gone, and replaced; an instance tagged with the
// stack that rpd never launched is terminated after orphan_grace.
func TestFleetVanishedAndOrphan(t *testing.T) {
	moto := ec2test.Start(t)
	ec2test.CreateLaunchTemplate(t, moto, "runner")
	for _, kv := range ec2test.Env(moto) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	body := strings.Replace(strings.Replace(fleetBody(1), `usage_class     = "spot"`, `usage_class     = "on-demand"`, 1),
		`interval        = "1s"`, "interval        = \"1s\"\n    orphan_grace    = \"2s\"", 1)
	td := startDaemon(t, body)
	waitFleet(t, td, "1 VM launched", func(f *api.FleetStatus) bool { return f.Launched["on-demand"] == 1 })
	var first string
	for id := range ec2test.Live(t, moto, "t", nil) {
		first = id
	}
	offer := fmt.Sprintf(`{"instance_id":%q,"usage_class":"on-demand","instance_type":"c6i.large","cpu":2,"mem":4096,"resource_class":"medium","threshold":%q}`,
		first, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if code, out := td.raw(t, http.MethodPost, "/v1/classes/medium/instances", offer); code != http.StatusOK {
		t.Fatalf("offer: %d %s", code, out)
	}
	waitFleet(t, td, "the runner idle", func(f *api.FleetStatus) bool { return f.Idle == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ec2test.Client(moto).TerminateInstances(ctx, &awsec2.TerminateInstancesInput{InstanceIds: []string{first}}); err != nil {
		t.Fatal(err)
	}
	orphan := ec2test.RunOrphan(t, moto, "t", "medium")
	st := waitFleet(t, td, "the vanished runner replaced and the orphan reaped", func(f *api.FleetStatus) bool {
		return f.LastHour["vanished"] == 1 && f.Launched["on-demand"] == 2 && f.Terminated["orphan"] == 1 && f.Booting == 1
	})
	if st.Idle != 0 {
		t.Errorf("fleet %+v; want the replacement booting and nothing idle", st)
	}
	if inst, err := td.c.Instance(ctx, first); err != nil || inst.State != "retired" {
		t.Errorf("the vanished runner's record: %+v, %v; want retired", inst, err)
	}
	if _, ok := ec2test.Live(t, moto, "t", nil)[orphan]; ok {
		t.Errorf("the orphan %s still runs", orphan)
	}
	code, out := td.raw(t, http.MethodPost, "/v1/classes/medium/pickup", `{"worker_id":"job-1","usage_class":"on-demand"}`)
	if code != http.StatusNotFound || !strings.Contains(out, "exhausted") {
		t.Errorf("pickup after the runner vanished: %d %s; want exhausted (its message deleted)", code, out)
	}
}
