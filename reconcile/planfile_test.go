package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/spec"
)

func TestSavedPlanRoundTrip(t *testing.T) {
	f := newFakeBackend()
	cfg := testConfig("ci")
	mustApply(t, cfg, f)
	cfg.Pools[0].Slots = 7
	cfg.RunnerClasses[1].Queue.Name = "ci-small-v2"
	p := mustPlan(t, cfg, f.live(), PlanOptions{Targets: []Address{{TypePool, "database_pool"}, {TypeRunnerClass, "small"}}})
	b, err := EncodePlan(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodePlan(b)
	if err != nil {
		t.Fatalf("DecodePlan: %v", err)
	}
	again, err := EncodePlan(back)
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("re-encoding differs (%v):\n%s\n---\n%s", err, again, b)
	}
	if back.Summary() != p.Summary() || len(back.Changes) != len(p.Changes) || back.Changes[0].Action != p.Changes[0].Action {
		t.Fatalf("decoded plan differs: %+v", back)
	}
	// The decoded plan applies.
	if _, err := Apply(context.Background(), back, f.live(), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if f.state().Pools["database_pool"].Slots != 7 || f.state().RunnerClasses["small"].Queue != "ci-small-v2" {
		t.Fatalf("saved plan not applied: %+v", f.state())
	}
}

func TestDecodePlanRefusesBadFiles(t *testing.T) {
	f := newFakeBackend()
	good, err := EncodePlan(mustPlan(t, testConfig("ci"), f.live(), PlanOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(fn func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		fn(m)
		b, _ := json.Marshal(m)
		return b
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "not a plan file rpd can read"},
		{"truncated", good[:len(good)/2], "not a plan file rpd can read"},
		{"trailing", append(append([]byte{}, good...), []byte(`{}`)...), "trailing data"},
		{"edited", bytes.Replace(good, []byte(`"slots": 3`), []byte(`"slots": 30`), 1), "checksum mismatch"},
		{"no checksum", edit(func(m map[string]any) { delete(m, "checksum") }), "no checksum"},
		{"newer", edit(func(m map[string]any) { m["format_version"] = 99; m["new_field"] = 1 }), "written by a newer rpd"},
		{"other version", edit(func(m map[string]any) { m["format_version"] = 0 }), "format_version 0"},
		{"unknown field", edit(func(m map[string]any) { m["surprise"] = true }), "unknown field"},
		{"bad action", bytes.Replace(good, []byte(`"create"`), []byte(`"explode"`), 1), "unknown actions"},
		{"bad address", bytes.Replace(good, []byte(`"queue.medium"`), []byte(`"bucket.medium"`), 1), "unknown type"},
		{"no desired", edit(func(m map[string]any) { delete(m, "desired") }), "names no stack or desired state"},
		{"foreign desired", edit(func(m map[string]any) { m["desired"].(map[string]any)["stack"] = "prod" }), `desired state is for stack "prod"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodePlan(tc.in)
			if !errors.Is(err, ErrBadPlanFile) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "rpd plan -out") {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRuntimeDocDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{`{"stack":"x"}`, "no format_version"},
		{`{"format_version":2,"stack":"x"}`, "newer rpd"},
		{`{"format_version":1,"stack":"x","nope":1}`, "unknown field"},
		{`{"format_version":1,"stack":"x"} {}`, "trailing data"},
		{`{"format_version":1,"stack":"x","pools":{"p":{"lease_ttl":"forever"}}}`, "bad duration"},
		{`not json`, "invalid character"},
	} {
		_, err := DecodeRuntimeDoc([]byte(tc.in))
		if !errors.Is(err, ErrDocFormat) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.in, err, tc.want)
		}
	}
	d, err := DecodeRuntimeDoc([]byte(`{"format_version":1,"stack":"x"}`))
	if err != nil || d.Pools == nil || d.Creating == nil {
		t.Fatalf("minimal document: %+v %v", d, err)
	}
}

func TestRuntimeDocRoundTrip(t *testing.T) {
	cfg := testConfig("ci")
	doc := DesiredDoc(cfg)
	b, err := doc.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeRuntimeDoc(b)
	if err != nil {
		t.Fatal(err)
	}
	// Entries are comparable values: a decoded document equals the one
	// encoded, entry by entry.
	if !maps.Equal(back.RunnerClasses, doc.RunnerClasses) || !maps.Equal(back.Budgets, doc.Budgets) ||
		!maps.Equal(back.VMCeilings, doc.VMCeilings) || !maps.Equal(back.Pools, doc.Pools) ||
		!maps.Equal(back.Priorities, doc.Priorities) || !maps.Equal(back.Queues, doc.Queues) {
		t.Fatalf("round trip differs:\n%s\n---\n%+v", b, back)
	}
	if got := back.RunnerClasses["medium"]; got.Queue != "ci-rp-medium" || got.InstanceTypes.Slice()[0] != "c6i.*" {
		t.Fatalf("class entry: %+v", got)
	}
	if got := back.Budgets["scanner"].SpillSlots; got != (OptionalInt{Value: 16, Set: true}) {
		t.Fatalf("spill_slots: %+v", got)
	}
	if back.VMCeilings["browser-vms"].Usage.URL == "" {
		t.Fatalf("ceiling lost its usage source: %+v", back.VMCeilings)
	}
	// Clone is deep: changing the copy leaves the original alone.
	c := doc.Clone()
	e := c.Budgets["scanner"]
	e.SpillSlots = OptionalInt{}
	c.Budgets["scanner"] = e
	if !doc.Budgets["scanner"].SpillSlots.Set {
		t.Fatal("Clone shares memory with the original")
	}
}

func TestStringListAndOptionalIntJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		out  string
	}{{`null`, []string{}, `null`}, {`[]`, []string{}, `null`}, {`["a","b"]`, []string{"a", "b"}, `["a","b"]`}} {
		var l StringList
		if err := json.Unmarshal([]byte(tc.in), &l); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		out, _ := json.Marshal(l)
		if !slices.Equal(l.Slice(), tc.want) || string(out) != tc.out {
			t.Errorf("%s: got %q, re-encoded %s; want %q, %s", tc.in, l.Slice(), out, tc.want, tc.out)
		}
	}
	if NewStringList([]string{"x"}) != NewStringList([]string{"x"}) || NewStringList([]string{"x"}) == NewStringList([]string{"y"}) {
		t.Error("StringList equality does not follow its contents")
	}
	var l StringList
	if err := json.Unmarshal([]byte(`[1]`), &l); err == nil {
		t.Error("a list of numbers was accepted")
	}
	var o OptionalInt
	if err := json.Unmarshal([]byte(`"x"`), &o); err == nil {
		t.Error("a string was accepted as an OptionalInt")
	}
	if err := json.Unmarshal([]byte(`7`), &o); err != nil || o != (OptionalInt{Value: 7, Set: true}) {
		t.Errorf("7 -> %+v, %v", o, err)
	}
}

func TestActionsAndAddresses(t *testing.T) {
	for _, a := range []Action{NoOp, Create, Update, DeleteThenCreate, Delete} {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var back Action
		if err := json.Unmarshal(b, &back); err != nil || back != a {
			t.Errorf("%v: round trip %s -> %v %v", a, b, back, err)
		}
	}
	if got := DeleteThenCreate.Symbol(); got != "-/+" {
		t.Errorf("replace symbol %q", got)
	}
	for _, s := range []string{"", "pool", "pool.", ".x", "bucket.x"} {
		if _, err := ParseAddress(s); err == nil {
			t.Errorf("ParseAddress(%q) accepted", s)
		}
	}
	a, err := ParseAddress("vm_ceiling.browser-vms.eu")
	if err != nil || a.Type != TypeVMCeiling || a.Name != "browser-vms.eu" {
		t.Errorf("dotted name: %+v %v", a, err)
	}
}

// A saved plan keeps every field of the backend block that decides how the
// backend is opened, realtime_sync among them.
func TestBackendConfigOfKeepsEveryField(t *testing.T) {
	b := spec.Backend{Type: "local", Path: "x.db", NormalPrioritySync: true, Region: "r", Profile: "p", TablePrefix: "t"}
	want := backend.Config{Type: "local", Path: "x.db", NormalPrioritySync: true, Region: "r", Profile: "p", TablePrefix: "t"}
	if got := BackendConfigOf(b); got != want {
		t.Fatalf("BackendConfigOf = %+v; want %+v", got, want)
	}
	p := mustPlan(t, testConfig("ci"), newFakeBackend().live(), PlanOptions{Backend: want})
	enc, err := EncodePlan(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodePlan(enc)
	if err != nil {
		t.Fatal(err)
	}
	if back.Backend != want {
		t.Fatalf("decoded plan's backend = %+v; want %+v", back.Backend, want)
	}
}
