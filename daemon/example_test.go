package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
	"github.com/rpdhq/rpd/daemon"
)

// Run a watch-mode daemon on a configuration directory, take a pool slot
// over HTTP, resize the pool by editing the file, and shut down.
func Example() {
	dir, _ := os.MkdirTemp("", "rpd-example")
	defer os.RemoveAll(dir)
	conf := filepath.Join(dir, "rpd.hcl")
	write := func(slots int) {
		_ = os.WriteFile(conf, fmt.Appendf(nil, "rpd {\n  backend \"local\" { path = %q }\n}\npool \"db\" { slots = %d }\n",
			filepath.Join(dir, "state.db"), slots), 0o644)
	}
	write(1)

	ctx, stop := context.WithCancel(context.Background())
	d, err := daemon.New(ctx, daemon.Options{Mode: daemon.ModeWatch, Path: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		stop()
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	c, _ := client.New(d.Addr())
	lease, _ := c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "example"})
	p, _ := c.Pool(ctx, "db")
	fmt.Printf("version %d: %s %d/%d used\n", d.Status().ConfigVersion, p.Name, p.Used, p.Total)

	write(3)
	res := d.Reload(ctx) // the watcher would do this within ~100 ms
	p, _ = c.Pool(ctx, "db")
	fmt.Printf("version %d: %s %d/%d used (ok %v)\n", res.ConfigVersion, p.Name, p.Used, p.Total, res.OK)

	_ = c.Release(ctx, lease.LeaseID)
	stop()
	fmt.Println("shutdown:", <-done)
	// Output:
	// version 1: db 1/1 used
	// version 2: db 1/3 used (ok true)
	// shutdown: <nil>
}
