package statuspage_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rpdhq/rpd/daemon"
	"github.com/rpdhq/rpd/internal/tlstest"
)

// TestPageOverTLS: the page works over HTTPS, with a read-only token.
func TestPageOverTLS(t *testing.T) {
	ca := tlstest.New(t)
	certFile, keyFile := ca.Files("server")
	ca.ServerCert("rpd-page", certFile, keyFile)
	const reader = "page-reader-secret-0123456789"
	sum := sha256.Sum256([]byte(reader))
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "rpd.hcl"), fmt.Sprintf(`rpd {
  stack = "tls-page"
  backend "local" { path = %q }
  tls {
    cert_file = %q
    key_file  = %q
  }
}
token "page" {
  sha256 = %q
  scopes = ["read"]
}
`, filepath.Join(state, "state.db"), certFile, keyFile, hex.EncodeToString(sum[:])))
	writeFile(t, filepath.Join(dir, "main.hcl"), pageHCL)
	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.New(ctx, daemon.Options{Mode: daemon.ModeWatch, Path: dir, Listen: "127.0.0.1:0", ManualReload: true, Logger: slog.New(slog.DiscardHandler)})
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

	tab := browser(t, 1024, 768)
	if err := chromedp.Do(tab, chromedp.Navigate("https://"+d.Addr()+"/"), chromedp.WaitVisible(chromedp.CSS("#token"))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tab, chromedp.SendKeys(chromedp.CSS("#token"), reader), chromedp.Click(chromedp.CSS("#login-form button"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, tab, "#pools", "bar_pool", liveWait)
	waitText(t, tab, "#stack", "stack tls-page", liveWait)
}
