package watch_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rpdhq/rpd/daemon/watch"
)

// Take decides whether a trigger was a real change: compare hashes.
func ExampleTake() {
	dir, _ := os.MkdirTemp("", "rpd-example")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "pools.hcl"), []byte(`pool "db" { slots = 3 }`), 0o644)
	_ = os.WriteFile(filepath.Join(dir, ".pools.hcl.swp"), []byte("editor state"), 0o644)

	before, _ := watch.Take(dir)
	_ = os.WriteFile(filepath.Join(dir, ".pools.hcl.swp"), []byte("more editor state"), 0o644)
	after, _ := watch.Take(dir)
	fmt.Println(len(before.Files), before.Hash == after.Hash)

	_ = os.WriteFile(filepath.Join(dir, "pools.hcl"), []byte(`pool "db" { slots = 4 }`), 0o644)
	changed, _ := watch.Take(dir)
	fmt.Println(before.Hash == changed.Hash)
	// Output:
	// 1 true
	// false
}

func ExampleIsConfigName() {
	for _, name := range []string{"pools.hcl", ".pools.hcl.swp", "pools.hcl~", "#pools.hcl#", "state.db"} {
		fmt.Println(name, watch.IsConfigName(name))
	}
	// Output:
	// pools.hcl true
	// .pools.hcl.swp false
	// pools.hcl~ false
	// #pools.hcl# false
	// state.db false
}
