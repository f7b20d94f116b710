package reconcile

import (
	"slices"
	"testing"

	"github.com/rpdhq/rpd/spec"
)

// A fleet block is shown by plan as attributes of its runner_class, one
// per argument and one per schedule argument; the document round-trips
// through JSON; an http usage source shows no ec2 attribute.
func TestFleetEntryInPlanAndDocument(t *testing.T) {
	src := `
vm_ceiling "aws" {
  max = 10
  usage "ec2" {
    unit = "vcpus"
    tags = { team = "ci" }
  }
}
vm_ceiling "web" {
  max = 10
  usage "http" { url = "http://127.0.0.1:9/usage" }
}
runner_class "medium" {
  cpu = 2
  mem = "4GiB"
  instance_types = ["c6i.large", "m6i.*"]
  fleet {
    launch_template = "runner"
    vm_ceiling      = "aws"
    min_idle        = 2
    schedule "day" {
      cron     = "0 8 * * MON-FRI"
      duration = "10h"
      timezone = "Europe/Berlin"
      min_idle = 5
    }
  }
}
`
	cfg, diags := spec.NewLoader().LoadSources(map[string][]byte{"main.hcl": []byte(src)}, spec.Vars{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	doc := DesiredDoc(cfg)
	v := entryValues(doc.RunnerClasses["medium"])
	for key, want := range map[string]any{
		"fleet.min_idle": 2, "fleet.launch_template": "runner", "fleet.instance_types": []string{"c6i.large"},
		"fleet.schedule.day.cron": "0 8 * * MON-FRI", "fleet.schedule.day.timezone": "Europe/Berlin", "fleet.schedule.day.min_idle": 5,
		"fleet.boot_timeout": "5m", "fleet.usage_class": "on-demand", "fleet.fallback": "none",
	} {
		if !valueEqual(v[key], want) {
			t.Errorf("%s = %v; want %v", key, v[key], want)
		}
	}
	if _, ok := v["fleet.schedules"]; ok {
		t.Error("the schedules are shown as one attribute; want one per argument")
	}
	aws, web := entryValues(doc.VMCeilings["aws"]), entryValues(doc.VMCeilings["web"])
	if !valueEqual(aws["usage.unit"], "vcpus") || !valueEqual(aws["usage.tags"], map[string]string{"team": "ci"}) {
		t.Errorf("ec2 usage values %v", aws)
	}
	if _, ok := web["usage.unit"]; ok {
		t.Errorf("an http usage source shows usage.unit: %v", web)
	}
	b, err := doc.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeRuntimeDoc(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.RunnerClasses["medium"] != doc.RunnerClasses["medium"] || back.VMCeilings["aws"] != doc.VMCeilings["aws"] {
		t.Errorf("the document does not round-trip:\n%+v\n%+v", back.RunnerClasses["medium"], doc.RunnerClasses["medium"])
	}
	changed := ChangedAttributes(v, entryValues(func() ClassEntry {
		e := doc.RunnerClasses["medium"]
		e.Fleet.MinIdle = 3
		return e
	}()))
	if !slices.Equal(changed, []string{"fleet.min_idle"}) {
		t.Errorf("changed %v; want [fleet.min_idle]", changed)
	}
}
