package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The CLI runs in-process through run, which tests and examples call with
// their own output streams.
func Example_validate() {
	dir, _ := os.MkdirTemp("", "rpd-example")
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "main.hcl")
	_ = os.WriteFile(cfg, []byte("pool \"database_pool\" {\n  slots = 3\n}\n"), 0o644)

	code := run([]string{"validate", cfg}, os.Stdout, os.Stdout)
	fmt.Println("exit", code)
	// Output:
	// Success! The configuration is valid.
	// exit 0
}

// fmt -check exits 3, Terraform's code, when a file is not formatted.
func Example_fmtCheck() {
	dir, _ := os.MkdirTemp("", "rpd-example")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "ugly.hcl"), []byte("pool \"q\" {\nslots=3\n}\n"), 0o644)

	code := run([]string{"fmt", "-check", dir}, io.Discard, os.Stdout)
	fmt.Println("exit", code)
	// Output:
	// exit 3
}
