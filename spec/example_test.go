package spec_test

import (
	"fmt"
	"os"

	"github.com/hashicorp/hcl/v2"

	"github.com/rpdhq/rpd/spec"
)

func ExampleLoader_LoadSources() {
	src := []byte(`
variable "env" { default = "dev" }

rpd { stack = "ci-${var.env}" }

runner_class "medium" {
  cpu = 2
  mem = "4GiB"
}

pool "database_pool" { slots = 3 }
`)
	cfg, diags := spec.NewLoader().LoadSources(map[string][]byte{"main.hcl": src}, spec.Vars{
		Env: []string{"RPD_VAR_env=prod"}, // the CLI passes os.Environ()
	})
	if diags.HasErrors() {
		fmt.Println(diags)
		return
	}
	rc := cfg.RunnerClasses[0]
	fmt.Println(cfg.Stack, rc.Name, rc.CPU, spec.FormatSize(rc.Mem), rc.Queue.Name, rc.Pickup.Mode)
	for _, p := range cfg.Pools {
		fmt.Println(p.Name, p.Slots)
	}
	// Output:
	// ci-prod medium 2 4GiB ci-prod-rp-medium lease
	// database_pool 3
	// default_pool 16
}

// Diagnostics carry file, line and column; Loader.Files supplies the
// sources so they print with snippets, as rpd validate does.
func ExampleLoader_Files() {
	l := spec.NewLoader()
	_, diags := l.LoadSources(map[string][]byte{
		"bad.hcl": []byte("pool \"p\" {\n  slots = -1\n}\n"),
	}, spec.Vars{})
	w := hcl.NewDiagnosticTextWriter(os.Stdout, l.Files(), 0, false)
	for _, d := range diags {
		_ = w.WriteDiagnostic(d)
	}
	// Output:
	// Error: Invalid value for "slots"
	//
	//   on bad.hcl line 2, in pool "p":
	//    2:   slots = -1
	//
	// slots must be between 1 and 1073741824; got -1.
}

func ExampleParseSize() {
	for _, s := range []string{"4GiB", "200MB", "1.5KiB", "1024"} {
		n, err := spec.ParseSize(s)
		fmt.Println(s, n, err)
	}
	_, err := spec.ParseSize("lots")
	fmt.Println(err)
	// Output:
	// 4GiB 4294967296 <nil>
	// 200MB 200000000 <nil>
	// 1.5KiB 1536 <nil>
	// 1024 1024 <nil>
	// "lots" is not a size: invalid syntax
}

func ExampleParseDuration() {
	d, _ := spec.ParseDuration("1d12h")
	fmt.Println(d, spec.FormatDuration(14*24*d/36))
	// Output:
	// 36h0m0s 14d
}
