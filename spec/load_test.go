package spec

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/valid")

// TestValidGolden loads each testdata/valid/*.hcl and compares the Config
// with its golden JSON (rewrite with go test ./spec -run Golden -update).
func TestValidGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.hcl")
	if len(files) < 3 {
		t.Fatalf("want at least 3 valid fixtures, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, diags := NewLoader().LoadSources(map[string][]byte{f: mustRead(t, f)}, Vars{})
			if len(diags) > 0 {
				t.Fatalf("diagnostics: %s", diags.Error())
			}
			got, err := json.MarshalIndent(cfg, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := strings.TrimSuffix(f, ".hcl") + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := mustRead(t, golden)
			if string(got) != string(want) {
				t.Errorf("Config differs from %s (run with -update after checking the change):\n%s", golden, got)
			}
		})
	}
}

// TestExamples fails when an example stops validating or loses what it is
// meant to show.
func TestExamples(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.hcl")
	if len(files) < 3 {
		t.Fatalf("want at least 3 examples, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, diags := Load(f, Vars{})
			if len(diags) > 0 {
				t.Fatalf("%s: %s", f, diags.Error())
			}
			if len(cfg.RunnerClasses) == 0 || len(cfg.Pools) < 2 {
				t.Errorf("%s: want at least one class and one declared pool, got %d classes, %d pools", f, len(cfg.RunnerClasses), len(cfg.Pools))
			}
			if filepath.IsAbs(cfg.Backend.Path) {
				t.Errorf("%s: backend path %q is absolute; examples keep it relative", f, cfg.Backend.Path)
			}
		})
	}
	cfg, diags := Load("../examples/aws.hcl", Vars{Flags: []string{"region=eu-west-1", "env=prod"}})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if cfg.Backend.Type != "aws" || cfg.Backend.Region != "eu-west-1" || cfg.Backend.TablePrefix != "rpd-ci-prod" {
		t.Errorf("aws example backend = %+v", cfg.Backend)
	}
	cfg, diags = Load("../examples/ci-fleet.hcl", Vars{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if len(cfg.RunnerClasses) != 3 || len(cfg.Budgets) != 1 || len(cfg.VMCeilings) != 1 || len(cfg.Pools) < 3 || len(cfg.Priorities) < 2 {
		t.Errorf("ci-fleet lost objects: %d classes %d budgets %d ceilings %d pools %d priorities",
			len(cfg.RunnerClasses), len(cfg.Budgets), len(cfg.VMCeilings), len(cfg.Pools), len(cfg.Priorities))
	}
	if u := cfg.VMCeilings[0].Usage; u == nil || !strings.HasPrefix(u.URL, "http://127.0.0.1:") {
		t.Errorf("ci-fleet ceiling usage = %+v, want http on 127.0.0.1", u)
	}
}

func TestDefaults(t *testing.T) {
	cfg := mustLoad(t, `
runner_class "c" {
  cpu = 1
  mem = "1GiB"
}
budget "b" {}
vm_ceiling "v" { max = 3 }
pool "p" { slots = 2 }
`, Vars{})
	if cfg.Stack != "default" || cfg.Listen != "127.0.0.1:7070" || cfg.Backend.Type != "local" || cfg.Backend.Path != ".rpd/state.db" || cfg.Backend.NormalPrioritySync {
		t.Errorf("rpd defaults: %+v", cfg)
	}
	rc := cfg.RunnerClasses[0]
	want := RunnerClass{
		Name: "c", CPU: 1, Mem: 1 << 30, InstanceTypes: []string{"*"},
		Queue:     QueueSpec{Name: "default-rp-c", VisibilityTimeout: 30 * time.Second, Retention: 96 * time.Hour},
		Pickup:    PickupSpec{RequeueDelay: 3 * time.Second, LocalExhaustion: 5, Mode: PickupModeLease},
		DeclRange: rc.DeclRange,
	}
	if !reflect.DeepEqual(rc, want) {
		t.Errorf("class defaults:\n got %+v\nwant %+v", rc, want)
	}
	b := cfg.Budgets[0]
	if b.ScanRing != 256<<20 || b.DeltaCache != 512<<20 || b.SpillSlots == nil || *b.SpillSlots != 16 {
		t.Errorf("budget defaults: %+v", b)
	}
	v := cfg.VMCeilings[0]
	if v.ClaimTTL != 2*time.Minute || v.PollInterval != 5*time.Second || v.StaleAfter != 30*time.Second || v.Grant != GrantNextUsage || v.Usage != nil {
		t.Errorf("ceiling defaults: %+v", v)
	}
	if len(cfg.Pools) != 2 || cfg.Pools[0].Name != DefaultPoolName || cfg.Pools[0].Slots != 16 || cfg.Pools[0].DeclRange != (hcl.Range{}) {
		t.Errorf("pools: %+v", cfg.Pools)
	}
}

func TestDefaultPoolOverride(t *testing.T) {
	cfg := mustLoad(t, `pool "default_pool" { slots = 4 }`, Vars{})
	if len(cfg.Pools) != 1 || cfg.Pools[0].Slots != 4 || cfg.Pools[0].DeclRange.Start.Line != 1 {
		t.Errorf("pools = %+v", cfg.Pools)
	}
}

func TestVariablePrecedence(t *testing.T) {
	dir := t.TempDir()
	f1 := filepath.Join(dir, "one.hcl")
	f2 := filepath.Join(dir, "two.hcl")
	writeFile(t, f1, "a = \"file1\"\nb = \"file1\"\nc = \"file1\"\nundeclared = 1\n")
	writeFile(t, f2, "b = \"file2\"\n")
	src := `
variable "a" { default = "default" }
variable "b" { default = "default" }
variable "c" { default = "default" }
variable "d" { default = "default" }
variable "e" { default = "default" }
variable "n" { type = number }
variable "l" {
  type    = list(string)
  default = []
}
rpd { stack = "${var.a}-${var.b}-${var.c}-${var.d}-${var.e}" }
pool "p" { slots = var.n }
runner_class "c" {
  cpu            = 1
  mem            = 1
  instance_types = length(var.l) > 0 ? var.l : ["*"]
}
`
	vars := Vars{
		Env:   []string{"RPD_VAR_a=env", "RPD_VAR_b=env", "RPD_VAR_d=env", "RPD_VAR_n=7", "RPD_VAR_nope=ignored", "PATH=/bin", "RPD_VAR_l=[\"m6i.*\", \"c6i.*\"]"},
		Files: []string{f1, f2},
		Flags: []string{"a=flag", "a=flag2"},
	}
	l := NewLoader()
	cfg, diags := l.LoadSources(map[string][]byte{"main.hcl": []byte(src)}, vars)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if cfg.Stack != "flag2-file2-file1-env-default" {
		t.Errorf("stack = %q; want flag2-file2-file1-env-default (flags > files in order > env > default)", cfg.Stack)
	}
	if cfg.Pools[1].Slots != 7 {
		t.Errorf("number variable from env: slots = %d", cfg.Pools[1].Slots)
	}
	if got := cfg.RunnerClasses[0].InstanceTypes; !reflect.DeepEqual(got, []string{"m6i.*", "c6i.*"}) {
		t.Errorf("list variable from env: %q", got)
	}
	if len(diags) != 1 || diags[0].Severity != hcl.DiagWarning || diags[0].Subject == nil || diags[0].Subject.Filename != f1 || diags[0].Subject.Start.Line != 4 {
		t.Errorf("want one warning for the undeclared variable at %s:4, got %s", f1, diags.Error())
	}
	if _, ok := l.Files()[f1]; !ok {
		t.Errorf("var file not among Loader.Files (needed for snippets)")
	}
}

func TestVariableErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.hcl")
	writeFile(t, bad, "n = \n")
	ref := filepath.Join(dir, "ref.hcl")
	writeFile(t, ref, "n = var.m\n")
	str := filepath.Join(dir, "str.hcl")
	writeFile(t, str, "n = \"many\"\n")
	src := map[string][]byte{"main.hcl": []byte("variable \"n\" {\n  type = number\n  default = 1\n}\nvariable \"l\" {\n  type = list(number)\n  default = []\n}\n")}
	for _, tc := range []struct {
		name string
		vars Vars
		want string
	}{
		{"undeclared flag", Vars{Flags: []string{"x=1"}}, "Value for undeclared variable"},
		{"malformed flag", Vars{Flags: []string{"novalue"}}, "Invalid -var option"},
		{"wrong type flag", Vars{Flags: []string{"n=abc"}}, "by the -var option is not valid"},
		{"wrong type flag says what was expected", Vars{Flags: []string{"n=abc"}}, `variable "n" by the -var option is not valid: a value of type number is required, got "abc"`},
		{"bare words in a list flag", Vars{Flags: []string{"l=[a, b]"}}, `variable "l" by the -var option is not valid: "[a, b]" is not a list(number) written in HCL: write it as ["a", "b"]`},
		{"bare word for a list flag", Vars{Flags: []string{"l=a"}}, `-var 'l=["a", "b"]'`},
		{"wrong type env", Vars{Env: []string{"RPD_VAR_n=abc"}}, "by the environment variable RPD_VAR_n is not valid"},
		{"wrong type var file", Vars{Files: []string{str}}, "by the variable file " + str + " is not valid"},
		{"bad list expression", Vars{Flags: []string{"l=[1,"}}, "Invalid value for variable"},
		{"missing var file", Vars{Files: []string{filepath.Join(dir, "nope.hcl")}}, "Failed to read file"},
		{"var file syntax", Vars{Files: []string{bad}}, "Invalid expression"},
		{"var file reference", Vars{Files: []string{ref}}, "Variables not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, diags := NewLoader().LoadSources(src, tc.vars)
			if cfg != nil || !diags.HasErrors() {
				t.Fatalf("want an error, got cfg=%v diags=%v", cfg != nil, diags)
			}
			if !strings.Contains(diags.Error(), tc.want) {
				t.Errorf("diagnostics %q do not mention %q", diags.Error(), tc.want)
			}
		})
	}
}

// TestDeterministic loads the same configuration, split over files in
// different orders and names, and wants identical objects in name order.
func TestDeterministic(t *testing.T) {
	blocks := []string{
		`pool "zeta" { slots = 1 }`, `pool "alpha" { slots = 2 }`,
		`priority "b" { weight = 1 }`, `priority "a" { weight = 2 }`,
		`runner_class "y" {
  cpu = 1
  mem = 1
}`, `runner_class "x" {
  cpu = 1
  mem = 1
}`,
		`budget "m" {}`, `budget "k" {}`, `vm_ceiling "q" { max = 1 }`, `vm_ceiling "p" { max = 1 }`,
	}
	load := func(split int) *Config {
		srcs := map[string][]byte{}
		for i, b := range blocks {
			name := filepath.Join("d", string(rune('a'+(i*split)%7))+".hcl")
			srcs[name] = append(srcs[name], []byte(b+"\n")...)
		}
		cfg, diags := NewLoader().LoadSources(srcs, Vars{})
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return cfg
	}
	names := func(c *Config) string {
		var s []string
		for _, x := range c.Pools {
			s = append(s, x.Name)
		}
		for _, x := range c.Priorities {
			s = append(s, x.Name)
		}
		for _, x := range c.RunnerClasses {
			s = append(s, x.Name)
		}
		for _, x := range c.Budgets {
			s = append(s, x.Name)
		}
		for _, x := range c.VMCeilings {
			s = append(s, x.Name)
		}
		return strings.Join(s, ",")
	}
	want := "alpha,default_pool,zeta,a,b,x,y,k,m,p,q"
	for split := 1; split <= 5; split++ {
		cfg := load(split)
		if got := names(cfg); got != want {
			t.Errorf("split %d: order %s, want %s", split, got, want)
		}
		if !sort.StringsAreSorted(cfg.Files) {
			t.Errorf("Files not sorted: %q", cfg.Files)
		}
	}
}

func TestLoadPaths(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.hcl"), `pool "a" { slots = 1 }`)
	writeFile(t, filepath.Join(dir, "b.hcl"), `pool "b" { slots = 2 }`)
	writeFile(t, filepath.Join(dir, "notes.txt"), `this is not HCL {`)
	writeFile(t, filepath.Join(dir, ".hidden.hcl"), `this is not HCL {`)
	if err := os.Mkdir(filepath.Join(dir, "sub.hcl"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load(dir, Vars{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if want := []string{filepath.Join(dir, "a.hcl"), filepath.Join(dir, "b.hcl")}; !reflect.DeepEqual(cfg.Files, want) {
		t.Errorf("Files = %q, want %q", cfg.Files, want)
	}
	cfg, diags = Load(filepath.Join(dir, "b.hcl"), Vars{})
	if diags.HasErrors() || len(cfg.Pools) != 2 {
		t.Errorf("single file: %v %v", diags, cfg)
	}
	cfg, diags = NewLoader().LoadFS(os.DirFS(dir), Vars{})
	if diags.HasErrors() || len(cfg.Pools) != 3 {
		t.Errorf("LoadFS: %v %+v", diags, cfg)
	}
	for _, p := range []string{filepath.Join(dir, "missing"), t.TempDir()} {
		if cfg, diags := Load(p, Vars{}); cfg != nil || !diags.HasErrors() {
			t.Errorf("Load(%s) succeeded", p)
		}
	}
	if cfg, diags := NewLoader().LoadFS(os.DirFS(t.TempDir()), Vars{}); cfg != nil || !diags.HasErrors() {
		t.Errorf("LoadFS of an empty dir succeeded")
	}
}

// TestParseErrorStopsDecoding: a file that doesn't parse may declare what
// the others use, so only its syntax errors are reported.
func TestParseErrorStopsDecoding(t *testing.T) {
	_, diags := NewLoader().LoadSources(map[string][]byte{
		"a.hcl": []byte("variable \"n\" {\n  default = 1\n"),
		"b.hcl": []byte("pool \"p\" { slots = var.n }\n"),
	}, Vars{})
	if len(diags) != 1 || diags[0].Subject.Filename != "a.hcl" {
		t.Errorf("want only a.hcl's syntax error, got %s", diags.Error())
	}
}

func TestAllErrorsAtOnce(t *testing.T) {
	_, diags := NewLoader().LoadSources(map[string][]byte{
		"bad.hcl": []byte("pool \"p\" {\n  slots = -1\n}\nbudget \"b\" {\n  scan_ring = \"lots\"\n}\n"),
	}, Vars{})
	var lines []int
	for _, d := range diags {
		lines = append(lines, d.Subject.Start.Line)
	}
	if !reflect.DeepEqual(lines, []int{2, 5}) {
		t.Errorf("error lines = %v, want [2 5]: %s", lines, diags.Error())
	}
}

func mustLoad(t *testing.T, src string, vars Vars) *Config {
	t.Helper()
	cfg, diags := NewLoader().LoadSources(map[string][]byte{"main.hcl": []byte(src)}, vars)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return cfg
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVarFileInsideConfig: a -var-file that is one of the configuration's
// *.hcl files is refused with what to do, not left to fail as an
// "Unsupported argument" in the configuration.
func TestVarFileInsideConfig(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), "variable \"n\" {\n  type = number\n}\npool \"p\" {\n  slots = var.n\n}\n")
	inside := filepath.Join(dir, "prod.hcl")
	writeFile(t, inside, "n = 2\n")
	_, diags := Load(dir, Vars{Files: []string{inside}})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "Variable file inside the configuration") || !strings.Contains(diags.Error(), "prod.vars") {
		t.Fatalf("var file inside the directory: %v", diags)
	}
	outside := filepath.Join(t.TempDir(), "prod.hcl")
	writeFile(t, outside, "n = 2\n")
	if err := os.Remove(inside); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load(dir, Vars{Files: []string{outside}})
	if diags.HasErrors() || cfg.Pools[len(cfg.Pools)-1].Slots != 2 {
		t.Fatalf("var file outside: %v", diags)
	}
}

// realtime_sync = false keeps the local backend's synced appends at the
// normal priority.
func TestLocalRealtimeSyncOff(t *testing.T) {
	cfg := mustLoad(t, `
rpd {
  backend "local" {
    realtime_sync = false
  }
}
`, Vars{})
	if !cfg.Backend.NormalPrioritySync || cfg.Backend.Path != ".rpd/state.db" {
		t.Fatalf("backend = %+v; want NormalPrioritySync and the default path", cfg.Backend)
	}
}
