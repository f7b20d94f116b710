package security

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/rpdhq/rpd/internal/tlstest"
	"github.com/rpdhq/rpd/spec"
)

// TestTLSFilesReloadOnChange: a rotated certificate is served without a
// restart; a half-rotated pair keeps the last good one.
func TestTLSFilesReloadOnChange(t *testing.T) {
	ca := tlstest.New(t)
	certFile, keyFile := ca.Files("server")
	first := ca.ServerCert("one", certFile, keyFile)
	f, err := NewTLSFiles(&spec.TLS{CertFile: certFile, KeyFile: keyFile}, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	f.interval = 0
	if got := f.certificate().Leaf.SerialNumber; got.Cmp(first) != 0 {
		t.Fatalf("serial %v; want %v", got, first)
	}
	// A key that does not match the certificate (the rotation half done).
	otherCert, otherKey := ca.Files("other")
	ca.ServerCert("other", otherCert, otherKey)
	writeFile(t, keyFile, readFile(t, otherKey))
	if got := f.certificate().Leaf.SerialNumber; got.Cmp(first) != 0 {
		t.Fatalf("after a half rotation: serial %v; want the previous %v", got, first)
	}
	second := ca.ServerCert("two", certFile, keyFile)
	if got := f.certificate().Leaf.SerialNumber; got.Cmp(second) != 0 {
		t.Fatalf("after the rotation: serial %v; want %v", got, second)
	}
	if _, err := NewTLSFiles(&spec.TLS{CertFile: certFile, KeyFile: filepath.Join(t.TempDir(), "missing")}, "", slog.New(slog.DiscardHandler)); err == nil {
		t.Error("newTLSFiles with a missing key succeeded")
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
