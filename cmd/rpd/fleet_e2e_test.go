package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpdhq/rpd/internal/ec2test"
)

// fleetHCL is a fleet of min_idle 3 on a ceiling of 6 counted from EC2.
const fleetHCL = `
vm_ceiling "aws" {
  max           = 6
  poll_interval = "1s"
  stale_after   = "5s"
  claim_ttl     = "60s"
  grant         = "immediate"
  usage "ec2" {}
}

runner_class "medium" {
  cpu            = 2
  mem            = "4GiB"
  instance_types = ["c6i.large"]

  fleet {
    launch_template = "runner"
    vm_ceiling      = "aws"
    min_idle        = 3
    boot_timeout    = "2m"
    orphan_grace    = "1m"
    interval        = "1s"
  }
}
`

// The leader is killed (-9) while its CreateFleet is in flight: the call,
// held by the proxy, still reaches EC2 and starts the VMs. The standby
// takes over, finds the launch intent the dead leader recorded before the
// call, attaches the VMs by their launch tag, and launches nothing more:
// one CreateFleet call, min_idle VMs, all of that one launch. On both
// state backends.
func TestFleetE2EKillLeaderMidLaunch(t *testing.T) {
	bothBackends(t, func(t *testing.T, onEmulators bool) {
		moto := ec2test.Start(t)
		ec2test.CreateLaunchTemplate(t, moto, "runner")
		proxy := ec2test.NewProxy(t, moto)
		proxy.Delay("CreateFleet", 3*time.Second)
		arrived := proxy.Arrived("CreateFleet")
		h := newHAStack(t, onEmulators, fleetHCL)
		if onEmulators {
			h.env = append(h.env, "AWS_ENDPOINT_URL_EC2="+proxy.URL)
		} else {
			h.env = append(h.env, ec2test.Env(proxy.URL)...)
		}
		stack := stackRE.FindStringSubmatch(h.rpdBlock)[1]
		d1 := h.start()
		d2 := h.start()
		leader := leaderOf(t, d1, d2)
		standby := d2
		if leader == d2 {
			standby = d1
		}
		select {
		case <-arrived:
		case <-time.After(30 * time.Second):
			t.Fatalf("the leader made no CreateFleet call within 30 s; log:\n%s", leader.stderr)
		}
		killed := time.Now()
		if code := leader.stop(syscall.SIGKILL); code != -9 {
			t.Fatalf("kill -9 of the leader: exit %d", code)
		}
		leaderOf(t, standby)
		took := time.Since(killed)

		// The VMs of the dead leader's call appear; nothing else may.
		var live map[string]map[string]string
		for i := 0; i < 100; i++ {
			if live = ec2test.Live(t, moto, stack, nil); len(live) >= 3 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(5 * time.Second) // several passes of the new leader
		live = ec2test.Live(t, moto, stack, nil)
		launches := map[string]int{}
		for _, tags := range live {
			launches[tags["rpd:launch"]]++
		}
		calls := proxy.Calls("CreateFleet")
		t.Logf("failover mid-launch (%s): new leader in %v; %d CreateFleet call(s), %d VMs from %d launch(es)", map[bool]string{false: "local", true: "aws"}[onEmulators], took.Round(100*time.Millisecond), calls, len(live), len(launches))
		if len(live) != 3 || len(launches) != 1 || calls != 1 {
			t.Fatalf("%d VMs from launches %v after %d CreateFleet calls; want the 3 of the dead leader's one launch, and no second call; new leader's log:\n%s", len(live), launches, calls, standby.stderr)
		}
		if !strings.Contains(standby.stderr.String(), "resolved a launch left unfinished") {
			t.Errorf("the new leader did not say it resolved the dead leader's launch; log:\n%s", standby.stderr)
		}
		// Its status counts them as booting, under the ceiling's claims.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cl, err := standby.c.Class(ctx, "medium")
		if err != nil || cl.Fleet == nil || cl.Fleet.Booting != 3 || !cl.Fleet.Leading {
			t.Fatalf("class status %+v, %v; want the fleet leading with 3 booting", fmt.Sprint(cl.Fleet), err)
		}
	})
}
