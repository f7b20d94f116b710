package statuspage_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
	"github.com/rpdhq/rpd/daemon"
	"github.com/rpdhq/rpd/daemon/statuspage"
)

// These tests load the page in headless Chromium (Debian's chromium
// package) against a daemon running in-process. Without Chromium they skip,
// except under CI=true, where they fail: CI installs it (.ci/run).

var update = flag.Bool("update", false, "rewrite docs/status-page.png from a fixed configuration")

// liveWait bounds how long the page may take to show a change: it polls
// every second, so 3 s allows for a slow poll.
const liveWait = 3 * time.Second

func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("RPD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium to test the status page with: CI must install it (apt-get install chromium), or set RPD_CHROMIUM")
	}
	t.Skip("no Chromium: the status page is not browser-tested (apt-get install chromium, or set RPD_CHROMIUM)")
	return ""
}

// shared is the one Chromium of the package's tests (it takes seconds to
// start on a loaded machine); each test opens its own tab in it.
var shared struct {
	once   sync.Once
	ctx    context.Context
	err    error
	cancel func()
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if shared.cancel != nil {
		shared.cancel()
	}
	os.Exit(code)
}

// browser returns a new tab of the shared headless Chromium, sized
// width×height, closed when the test ends.
func browser(t *testing.T, width, height int) context.Context {
	t.Helper()
	path := chromium(t)
	shared.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.NoSandbox, // CI runs as root
			chromedp.Flag("force-device-scale-factor", "1"),
			// TestPageOverTLS's daemon has a certificate of a CA made for
			// the test, which the browser does not know.
			chromedp.Flag("ignore-certificate-errors", true),
		)
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelBrowser := chromedp.NewContext(actx)
		shared.ctx, shared.cancel = bctx, func() { cancelBrowser(); cancelAlloc() }
		shared.err = chromedp.Do(bctx)
	})
	if shared.err != nil {
		t.Fatalf("start Chromium %s: %v", path, shared.err)
	}
	tab, cancelTab := chromedp.NewContext(shared.ctx)
	ctx, cancel := context.WithTimeout(tab, 90*time.Second)
	t.Cleanup(func() { cancel(); cancelTab() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatalf("open a Chromium tab: %v", err)
	}
	return ctx
}

type testDaemon struct {
	d    *daemon.Daemon
	c    *client.Client
	dir  string
	base string
}

const pageHCL = `
pool "bar_pool" {
  slots       = 3
  description = "three slots for the browser test"
}
budget "scanner" {
  scan_ring   = "256MiB"
  delta_cache = "512MiB"
  spill_slots = 4
}
vm_ceiling "browser-vms" {
  max = 20
}
runner_class "medium" {
  cpu            = 2
  mem            = "4GiB"
  instance_types = ["c6i.large"]
}
`

// startDaemon runs a watch-mode daemon (reloaded explicitly) on main.hcl.
func startDaemon(t *testing.T, stack, body, token string) *testDaemon {
	t.Helper()
	dir, state := t.TempDir(), t.TempDir()
	rpd := fmt.Sprintf("rpd {\n  stack = %q\n  backend \"local\" { path = %q }\n}\n", stack, filepath.Join(state, "state.db"))
	writeFile(t, filepath.Join(dir, "rpd.hcl"), rpd)
	writeFile(t, filepath.Join(dir, "main.hcl"), body)
	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.New(ctx, daemon.Options{Mode: daemon.ModeWatch, Path: dir, Listen: "127.0.0.1:0", ManualReload: true, Token: token,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		cancel()
		t.Fatalf("start the daemon: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("the daemon did not stop within 20s")
		}
	})
	c, err := client.New(d.Addr(), client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return &testDaemon{d: d, c: c, dir: dir, base: "http://" + d.Addr() + "/"}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// populate holds a slot, a permit, a claim and a runner so every section
// has something to show.
func (td *testDaemon) populate(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err := td.c.Acquire(ctx, "bar_pool", api.AcquireRequest{TaskID: "bar-task-7", TTLSeconds: 300})
	must("acquire", err)
	_, err = td.c.AcquirePermit(ctx, "scanner", api.PermitRequest{ScanRingBytes: 96 << 20, DeltaCacheBytes: 300 << 20, Spill: true, TTLSeconds: 300})
	must("permit", err)
	_, err = td.c.PushUsage(ctx, "browser-vms", 9)
	must("usage", err)
	claim := make(chan error, 1)
	go func() {
		_, err := td.c.RequestClaim(ctx, "browser-vms", api.ClaimRequest{WorkerID: "vm-worker-3", Count: 2, WaitSeconds: 10})
		claim <- err
	}()
	// The ceiling grants at its next usage figure: push figures until the
	// claim is granted.
	for granted := false; !granted; {
		select {
		case err := <-claim:
			must("claim", err)
			granted = true
		case <-time.After(50 * time.Millisecond):
			_, err := td.c.PushUsage(ctx, "browser-vms", 9)
			must("usage", err)
		}
	}
	for _, id := range []string{"i-0a1", "i-0a2", "i-0a3"} {
		_, err = td.c.Offer(ctx, "medium", api.Instance{InstanceID: id, UsageClass: "spot", InstanceType: "c6i.large", CPU: 2, Mem: 4096, ResourceClass: "medium", Threshold: time.Now().Add(time.Hour)})
		must("offer "+id, err)
	}
	_, err = td.c.Pickup(ctx, "medium", api.PickupRequest{WorkerID: "runner-host-1"})
	must("pickup", err)
}

// text returns the text of the first element matching sel ("" if none).
func text(ctx context.Context, sel string) (string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel)))
}

// waitText waits up to d for the element sel to contain want and returns
// how long it took.
func waitText(t *testing.T, ctx context.Context, sel, want string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < d {
		s, err := text(ctx, sel)
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		if strings.Contains(s, want) {
			return time.Since(start)
		}
		last = s
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not show %q within %v; it shows: %.600s", sel, want, d, last)
	return 0
}

func TestPageShowsLiveState(t *testing.T) {
	td := startDaemon(t, "browser", pageHCL, "")
	ctx := browser(t, 1280, 900)
	td.populate(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(td.base)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#pools", "bar_pool", 10*time.Second)
	waitText(t, ctx, "#pools", "bar-task-7", liveWait)
	waitText(t, ctx, "#budgets", "scanner", liveWait)
	waitText(t, ctx, "#budgets", "96 MiB / 256 MiB", liveWait)
	waitText(t, ctx, "#ceilings", "9 provider + 2 claimed / 20", liveWait)
	waitText(t, ctx, "#ceilings", "vm-worker-3", liveWait)
	waitText(t, ctx, "#classes", "2 idle · 1 claimed", liveWait)
	waitText(t, ctx, "#stack", "stack browser", liveWait)
	waitText(t, ctx, "#meta", "config v1", liveWait)

	// Acquire through the API: the pool's numbers change within 3 s.
	waitText(t, ctx, "#pools", "1/3 used", liveWait)
	if _, err := td.c.Acquire(context.Background(), "bar_pool", api.AcquireRequest{TaskID: "bar-task-8", Slots: 2}); err != nil {
		t.Fatal(err)
	}
	took := waitText(t, ctx, "#pools", "3/3 used", liveWait)
	waitText(t, ctx, "#pools", "bar-task-8", liveWait)
	t.Logf("the page showed the acquire after %v", took.Round(time.Millisecond))

	// Break the configuration: the error shows in red with its file:line.
	writeFile(t, filepath.Join(td.dir, "main.hcl"), pageHCL+"\npool \"broken\" {\n  slots = \n}\n")
	if res := td.d.Reload(context.Background()); res.OK {
		t.Fatal("a broken configuration was accepted")
	}
	line := strings.Count(pageHCL, "\n") + 4 // the line of "slots =" ... its value is missing on the next one
	waitText(t, ctx, "#reload", "Configuration rejected", liveWait)
	got, _ := text(ctx, "#reload .where")
	if !strings.Contains(got, "main.hcl:") {
		t.Fatalf("the reload error names %q, want main.hcl:LINE", got)
	}
	if !strings.Contains(got, fmt.Sprintf("main.hcl:%d", line)) && !strings.Contains(got, fmt.Sprintf("main.hcl:%d", line-1)) {
		t.Errorf("the reload error points at %q, want main.hcl:%d (the empty value)", got, line)
	}
	cls, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("reload").className`))
	if err != nil || !strings.Contains(cls, "failed") {
		t.Errorf("the reload box has class %q (%v), want it marked failed (red)", cls, err)
	}
	// The last good configuration still serves, and the page still updates.
	waitText(t, ctx, "#pools", "bar_pool", liveWait)

	// Fixed again: the banner goes.
	writeFile(t, filepath.Join(td.dir, "main.hcl"), pageHCL)
	if res := td.d.Reload(context.Background()); !res.OK {
		t.Fatalf("reload: %s", res.Error)
	}
	deadline := time.Now().Add(liveWait)
	for {
		s, _ := text(ctx, "#reload")
		if s == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reload error still shows after a good reload: %q", s)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The filter narrows the pools to those matching a task ID.
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#filter"), "bar-task-8")); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#pools-count", "1 of 2", liveWait)
}

func TestPageAsksForTheToken(t *testing.T) {
	const token = "s3cret-browser-token"
	td := startDaemon(t, "locked", pageHCL, token)
	td.populate(t)

	// The HTML is served without the token and holds no data.
	resp, err := http.Get(td.base)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(html), "bar_pool") || strings.Contains(string(html), "locked") {
		t.Fatalf("GET / without the token = %d, holding data: %s", resp.StatusCode, html)
	}

	ctx := browser(t, 1024, 768)
	if err := chromedp.Do(ctx, chromedp.Navigate(td.base), chromedp.WaitVisible(chromedp.CSS("#token"))); err != nil {
		t.Fatal(err)
	}
	body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"bar_pool", "bar-task-7", "scanner", "locked", "medium", "leases JSON"} {
		if strings.Contains(body, secret) {
			t.Fatalf("before the token is entered the page shows %q:\n%s", secret, body)
		}
	}

	// A wrong token is refused and asked for again.
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#token"), "wrong"), chromedp.Click(chromedp.CSS("#login-form button"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#login-error", "refused", liveWait)
	if s, _ := text(ctx, "#pools"); s != "" {
		t.Fatalf("a wrong token shows data: %q", s)
	}

	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#login-form button"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#pools", "bar-task-7", liveWait)
	waitText(t, ctx, "#stack", "stack locked", liveWait)
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(loc, token) {
		t.Fatalf("the token is in the page's URL %s", loc)
	}
	// Asked once: a reload of the page in the same tab needs no new entry.
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#pools", "bar-task-7", liveWait)
}

// TestScreenshot writes docs/status-page.png with -update.
func TestScreenshot(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite docs/status-page.png")
	}
	td := startDaemon(t, "ci-prod", screenshotHCL, "")
	ctx := browser(t, 1200, 900)
	td.populate(t)
	c := context.Background()
	for _, req := range []struct {
		pool, task  string
		slots, prio int
	}{
		{"database_pool", "nightly-build-4411", 2, 5}, {"database_pool", "migrate-orders-7", 1, 0},
		{"gpu", "train-resnet-12", 3, 10}, {"gpu", "eval-12", 1, 0},
	} {
		p := req.prio
		if _, err := td.c.Acquire(c, req.pool, api.AcquireRequest{TaskID: req.task, Slots: req.slots, Priority: &p, TTLSeconds: 600}); err != nil {
			t.Fatal(err)
		}
	}
	// Two requests wait for database_pool.
	for i, prio := range []int{100, 0} {
		go func() {
			p := prio
			_, _ = td.c.Acquire(c, "database_pool", api.AcquireRequest{TaskID: fmt.Sprintf("report-%d", i), Slots: 1, Priority: &p, WaitSeconds: 60})
		}()
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(td.base)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#pools", "2 queued", 10*time.Second)
	waitText(t, ctx, "#classes", "claimed", liveWait)
	if err := chromedp.Do(ctx, chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "status-page.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

const screenshotHCL = pageHCL + `
pool "database_pool" {
  slots       = 3
  description = "at most 3 concurrent heavy queries"
}
pool "gpu" {
  slots = 8
}
`

// With hundreds of pools the page starts collapsed (bars, no holder
// tables), and the filter finds one pool or one holder among them.
func TestPageWithManyPools(t *testing.T) {
	var b strings.Builder
	for i := range 500 {
		fmt.Fprintf(&b, "pool \"pool_%03d\" {\n  slots = 4\n}\n", i)
	}
	td := startDaemon(t, "many", b.String(), "")
	if _, err := td.c.Acquire(context.Background(), "pool_321", api.AcquireRequest{TaskID: "needle-task", Slots: 3}); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t, 1280, 900)
	if err := chromedp.Do(ctx, chromedp.Navigate(td.base)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#pools-count", "501", 10*time.Second)
	count := func(expr string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`document.querySelectorAll("#pools article.card").length`); n != 501 {
		t.Fatalf("%d pool cards, want 501", n)
	}
	if n := count(`document.querySelectorAll("#pools table").length`); n != 0 {
		t.Fatalf("%d holder tables open with 501 pools, want all collapsed", n)
	}
	if s, _ := text(ctx, "#pools"); strings.Contains(s, "needle-task") {
		t.Fatal("a collapsed pool shows its holders")
	}

	// Filtering by a holder's task finds its pool and opens it.
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#filter"), "needle")); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#pools-count", "1 of 501", liveWait)
	waitText(t, ctx, "#pools", "needle-task", liveWait)
	waitText(t, ctx, "#pools", "3/4 used", liveWait)

	// "busy only" keeps the pools someone holds.
	clear := `(f => { f.value = ""; f.dispatchEvent(new Event("input")); return true })(document.getElementById("filter"))`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](clear)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#busy"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#pools-count", "1 of 501", liveWait)
	// A click on a card's head opens it (clicked from script: the sticky
	// header may cover the card where Chromium scrolled it).
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#pools article.card button.head").click(), true`)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#pools table", "needle-task", liveWait)
}

// On a phone-sized screen nothing is wider than the screen: tables scroll
// inside their cards.
func TestPageFitsAPhone(t *testing.T) {
	td := startDaemon(t, "phone", pageHCL, "")
	td.populate(t)
	ctx := browser(t, 390, 844)
	if err := chromedp.Do(ctx, chromedp.Navigate(td.base)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#pools", "bar-task-7", 10*time.Second)
	waitText(t, ctx, "#classes", "claimed", liveWait)
	over, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if over > 0 {
		t.Fatalf("the page is %dpx wider than a 390px screen", over)
	}
}

// A standby replica shows its role and the leader it forwards to (the
// fields of GET /v1/status when the daemon runs replicas), here from a
// stand-in API.
func TestPageShowsTheLeader(t *testing.T) {
	page := statuspage.New()
	mux := http.NewServeMux()
	for _, p := range page.Patterns() {
		mux.Handle(p, page)
	}
	status := `{"mode":"watch","stack":"ha","config_version":3,"config_hash":"ab","state_version":3,
		"last_reload":{"ok":true,"at":"2026-11-24T12:00:00Z"},"started_at":"2026-11-24T11:00:00Z",
		"role":"standby","epoch":0,"config_matches_leader":false,
		"leader":{"holder":"host-a","address":"http://10.0.0.2:7070","mode":"watch","epoch":7},
		"pools":[],"budgets":[],"ceilings":[],"classes":[],"priorities":{}}`
	for path, body := range map[string]string{"GET /v1/status": status, "GET /v1/leases": `{"leases":[]}`, "GET /v1/classes": `{"classes":[]}`} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := browser(t, 1280, 600)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#meta", "standby", 10*time.Second)
	waitText(t, ctx, "#meta", "leader http://10.0.0.2:7070", liveWait)
	waitText(t, ctx, "#meta", "config differs from the leader", liveWait)
}

// A standby shows the leader's figures and says so; when the leader stops
// answering (a failover) the page keeps the last figures with a banner
// instead of blanking or showing zeros, and it fetches holders only for
// open cards, conditionally.
func TestPageKeepsTheLastFiguresDuringAFailover(t *testing.T) {
	page := statuspage.New()
	mux := http.NewServeMux()
	for _, p := range page.Patterns() {
		mux.Handle(p, page)
	}
	var leaderGone atomic.Bool
	var leaseQueries atomic.Value
	leaseQueries.Store("")
	const head = `{"mode":"watch","stack":"ha","config_version":3,"config_hash":"ab","state_version":3,
		"last_reload":{"ok":true,"at":"2026-11-24T12:00:00Z"},"started_at":"2026-11-24T11:00:00Z",
		"role":"standby","epoch":0,"config_matches_leader":true,
		"leader":{"holder":"host-a","address":"http://10.0.0.2:7070","mode":"watch","epoch":7},
		"version":{"version":"v1.2.0","revision":"aaaaaaaaaaaa","go_version":"go1.26"},
		"leader_version":{"version":"v1.1.0","revision":"bbbbbbbbbbbb","go_version":"go1.26"},
		"classes":[],"priorities":{"critical":100},`
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if leaderGone.Load() {
			_, _ = io.WriteString(w, head+`"source":"unavailable","source_error":"the leader at http://10.0.0.2:7070 does not answer","pools":null,"budgets":null,"ceilings":null}`)
			return
		}
		_, _ = io.WriteString(w, head+`"source":"leader","pools":[{"name":"db","description":"","total":3,"used":2,"available":1,"queued":1,
			"queued_by_priority":[{"priority":100,"requests":1,"slots":1,"oldest_wait_seconds":4,"task_ids":["deploy-9"]}],"leases":2,"holders_url":"/v1/leases?pool=db","retained":false}],"budgets":[],"ceilings":[]}`)
	})
	mux.HandleFunc("GET /v1/leases", func(w http.ResponseWriter, r *http.Request) {
		leaseQueries.Store(r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"total":2,"leases":[{"kind":"pool","id":"db.x-1","component":"db","task_id":"etl-7","priority":100,"slots":2}]}`)
	})
	mux.HandleFunc("GET /v1/classes", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"classes":[]}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := browser(t, 1280, 800)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#meta", "figures from the leader", 10*time.Second)
	waitText(t, ctx, "#meta", "mixed versions: leader runs v1.1.0", liveWait)
	waitText(t, ctx, "#pools", "1 request at priority critical (100) (1 slot)", liveWait)
	waitText(t, ctx, "#pools", "deploy-9", liveWait)
	waitText(t, ctx, "#pools", "etl-7", liveWait)
	waitText(t, ctx, "#pools", "showing the first 1 of 2", liveWait)
	if q := leaseQueries.Load().(string); q != "pool=db&limit=100" {
		t.Errorf("the page asked GET /v1/leases?%s; want the open card's first holders (pool=db&limit=100)", q)
	}

	leaderGone.Store(true)
	waitText(t, ctx, "#conn", "showing the last known figures", liveWait)
	waitText(t, ctx, "#conn", "does not answer", liveWait)
	waitText(t, ctx, "#pools", "2/3 used", liveWait)
}
