package pickup_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/runtime/pickup"
)

const seedBody = `{
  "instanceId": "i-12345678",
  "usageClass": "on-demand",
  "instanceType": "c6i.large",
  "cpu": 2,
  "mem": 4096,
  "resourceClass": "medium",
  "threshold": "2025-05-31T12:20:00Z"
}`

func TestParseEntrySeedExample(t *testing.T) {
	got, err := pickup.ParseEntry(seedBody)
	if err != nil {
		t.Fatal(err)
	}
	want := pickup.Entry{InstanceID: "i-12345678", UsageClass: "on-demand", InstanceType: "c6i.large", CPU: 2, MemMiB: 4096,
		ResourceClass: "medium", Threshold: time.Date(2025, 5, 31, 12, 20, 0, 0, time.UTC)}
	if got != want {
		t.Fatalf("got %+v; want %+v", got, want)
	}
	// Body round-trips.
	again, err := pickup.ParseEntry(got.Body())
	if err != nil || again != want {
		t.Fatalf("round trip: got %+v, %v; want %+v", again, err, want)
	}
}

func TestParseEntryRejects(t *testing.T) {
	field := func(from, to string) string { return strings.Replace(seedBody, from, to, 1) }
	cases := []struct {
		name, body string
		reason     pickup.DiscardReason
		detail     string
	}{
		{"empty", ``, pickup.ReasonMalformed, "not a JSON object"},
		{"array", `[1,2]`, pickup.ReasonMalformed, "not a JSON object"},
		{"truncated", seedBody[:40], pickup.ReasonMalformed, "bad JSON"},
		{"trailing data", seedBody + `{}`, pickup.ReasonMalformed, "after the JSON object"},
		{"unknown field", field(`"cpu": 2,`, `"cpu": 2, "zone": "a",`), pickup.ReasonMalformed, `unknown field "zone"`},
		{"wrong case", field(`"instanceId"`, `"InstanceId"`), pickup.ReasonMalformed, `unknown field "InstanceId"`},
		{"duplicate", field(`"cpu": 2,`, `"cpu": 2, "cpu": 4,`), pickup.ReasonMalformed, "appears twice"},
		{"missing", field(`"resourceClass": "medium",`, ``), pickup.ReasonMalformed, `"resourceClass" is missing`},
		{"null", field(`"instanceType": "c6i.large"`, `"instanceType": null`), pickup.ReasonMalformed, "must be a string"},
		{"empty string", field(`"instanceId": "i-12345678"`, `"instanceId": ""`), pickup.ReasonMalformed, "is empty"},
		{"cpu string", field(`"cpu": 2`, `"cpu": "2"`), pickup.ReasonMalformed, "must be an integer"},
		{"cpu float", field(`"cpu": 2`, `"cpu": 2.5`), pickup.ReasonMalformed, "must be an integer"},
		{"cpu exponent", field(`"cpu": 2`, `"cpu": 2e0`), pickup.ReasonMalformed, "must be an integer"},
		{"mem zero", field(`"mem": 4096`, `"mem": 0`), pickup.ReasonMalformed, "must be positive"},
		{"mem negative", field(`"mem": 4096`, `"mem": -1`), pickup.ReasonMalformed, "must be positive"},
		{"mem huge", field(`"mem": 4096`, `"mem": 99999999999999`), pickup.ReasonMalformed, "must be an integer"},
		{"threshold not a time", field(`"2025-05-31T12:20:00Z"`, `"next tuesday"`), pickup.ReasonMalformed, "RFC 3339"},
		{"threshold number", field(`"2025-05-31T12:20:00Z"`, `1748694000`), pickup.ReasonMalformed, "must be a string"},
		{"usage class", field(`"on-demand"`, `"reserved"`), pickup.ReasonUnknownUsageClass, `"reserved"`},
		{"usage class case", field(`"on-demand"`, `"On-Demand"`), pickup.ReasonUnknownUsageClass, "neither"},
		{"too large", seedBody + strings.Repeat(" ", pickup.MaxBodySize), pickup.ReasonTooLarge, "more than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := pickup.ParseEntry(c.body)
			var d *pickup.DiscardError
			if !errors.As(err, &d) {
				t.Fatalf("got %v; want a *DiscardError", err)
			}
			if d.Reason != c.reason || !strings.Contains(d.Error(), c.detail) {
				t.Fatalf("got %s: %v; want %s mentioning %q", d.Reason, d, c.reason, c.detail)
			}
		})
	}
}

func TestRequirementsMatch(t *testing.T) {
	e := pickup.Entry{InstanceID: "i-1", UsageClass: pickup.UsageSpot, InstanceType: "m6i.large", CPU: 4, MemMiB: 8192, ResourceClass: "large"}
	cases := []struct {
		name string
		req  pickup.Requirements
		want bool
	}{
		{"none", pickup.Requirements{}, true},
		{"usage", pickup.Requirements{UsageClass: pickup.UsageSpot}, true},
		{"other usage", pickup.Requirements{UsageClass: pickup.UsageOnDemand}, false},
		{"glob star", pickup.Requirements{InstanceTypes: []string{"c6i.*", "m6i.*"}}, true},
		{"glob question", pickup.Requirements{InstanceTypes: []string{"m?i.large"}}, true},
		{"glob miss", pickup.Requirements{InstanceTypes: []string{"c6i.*", "m?i.xlarge"}}, false},
		{"min cpu met", pickup.Requirements{MinCPU: 4}, true},
		{"min cpu not met", pickup.Requirements{MinCPU: 5}, false},
		{"min mem not met", pickup.Requirements{MinMemMiB: 8193}, false},
		{"resource class", pickup.Requirements{ResourceClass: "large"}, true},
		{"other resource class", pickup.Requirements{ResourceClass: "small"}, false},
	}
	for _, c := range cases {
		if got := c.req.Matches(e); got != c.want {
			t.Errorf("%s: got %v; want %v", c.name, got, c.want)
		}
	}
	for _, bad := range []pickup.Requirements{
		{UsageClass: "reserved"}, {InstanceTypes: []string{"[c6i"}}, {MinCPU: -1}, {MinMemMiB: -1},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil; want an error", bad)
		}
	}
}

func TestClassify(t *testing.T) {
	now := time.Date(2025, 5, 31, 12, 0, 0, 0, time.UTC)
	seedThreshold := time.Date(2025, 5, 31, 12, 20, 0, 0, time.UTC)
	cfg := pickup.Config{Class: "medium", CPU: 2, Mem: 4 << 30, InstanceTypes: []string{"c6i.*"}}
	cases := []struct {
		name   string
		cfg    pickup.Config
		body   string
		now    time.Time
		want   pickup.Outcome
		reason pickup.DiscardReason
	}{
		{"pass", cfg, seedBody, now, pickup.PassOn, 0},
		{"requeue", cfg, strings.Replace(seedBody, "on-demand", "spot", 1), now, pickup.Requeue, 0},
		{"expired", cfg, seedBody, now.Add(time.Hour), pickup.Discard, pickup.ReasonExpired},
		{"expired at the instant", cfg, seedBody, time.Date(2025, 5, 31, 12, 20, 0, 0, time.UTC), pickup.Discard, pickup.ReasonExpired},
		{"cpu contradicts class", pickup.Config{Class: "medium", CPU: 4}, seedBody, now, pickup.Discard, pickup.ReasonClassMismatch},
		{"mem contradicts class", pickup.Config{Class: "medium", Mem: 8 << 30}, seedBody, now, pickup.Discard, pickup.ReasonClassMismatch},
		{"type outside class", pickup.Config{Class: "medium", InstanceTypes: []string{"m6i.*"}}, seedBody, now, pickup.Discard, pickup.ReasonClassMismatch},
		{"undeclared specs", pickup.Config{Class: "medium"}, seedBody, now, pickup.PassOn, 0},
		{"malformed", cfg, "{}", now, pickup.Discard, pickup.ReasonMalformed},
		{"threshold too far ahead", cfg, seedBody, seedThreshold.Add(-pickup.MaxThresholdAhead - time.Second), pickup.Discard, pickup.ReasonMalformed},
		{"threshold at the far edge", cfg, seedBody, seedThreshold.Add(-pickup.MaxThresholdAhead), pickup.PassOn, 0},
	}
	for _, c := range cases {
		got, _, err := pickup.Classify(c.cfg, pickup.Requirements{UsageClass: pickup.UsageOnDemand}, c.body, c.now)
		if got != c.want {
			t.Errorf("%s: got %s (%v); want %s", c.name, got, err, c.want)
			continue
		}
		var d *pickup.DiscardError
		if got == pickup.Discard && (!errors.As(err, &d) || d.Reason != c.reason) {
			t.Errorf("%s: got %v; want reason %s", c.name, err, c.reason)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := pickup.Config{Class: "medium"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	bad := []pickup.Config{
		{},
		{Class: "c", Mode: "hoard"},
		{Class: "c", CPU: -1},
		{Class: "c", InstanceTypes: []string{"c6i.["}},
		{Class: "c", RequeueDelay: 16 * time.Minute},
		{Class: "c", RequeueDelay: -time.Second},
		{Class: "c", Visibility: 13 * time.Hour},
		{Class: "c", ReceiveWait: 21 * time.Second},
		{Class: "c", EmptyConfirmWait: -2},
		{Class: "c", LocalExhaustion: -1},
		{Class: "c", MaxTracked: -1},
		{Class: "c", ClaimAttempts: -1},
		{Class: "c", Backoff: -1},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil; want an error", c)
		}
		if _, err := pickup.NewManager(c, newMemQueue(time.Now), newMemTable(time.Now), pickup.Options{}); err == nil {
			t.Errorf("NewManager(%+v) succeeded; want an error", c)
		}
	}
	if _, err := pickup.NewManager(ok, nil, nil, pickup.Options{}); err == nil {
		t.Error("NewManager without a backend succeeded")
	}
}

func TestExhaustedError(t *testing.T) {
	var err error = &pickup.ExhaustedError{Class: "medium", Kind: pickup.Local, InstanceID: "i-1", Seen: 6}
	var ex *pickup.ExhaustedError
	if !errors.Is(err, pickup.ErrExhausted) || !errors.As(err, &ex) || ex.Kind != pickup.Local {
		t.Fatalf("errors.Is/As do not see %v as a local ErrExhausted", err)
	}
	if !strings.Contains(err.Error(), "i-1 seen 6 times") {
		t.Fatalf("message %q does not name the instance", err)
	}
	if errors.Is(errors.New("other"), pickup.ErrExhausted) {
		t.Fatal("an unrelated error is ErrExhausted")
	}
}
