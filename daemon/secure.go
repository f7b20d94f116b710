package daemon

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"reflect"

	"github.com/hashicorp/hcl/v2"

	"github.com/rpdhq/rpd/daemon/internal/security"
	"github.com/rpdhq/rpd/spec"
)

// secure sets up, at start-up, what cfg says about security: the
// credentials (refusing weak or missing ones on an address other hosts
// reach), the TLS files and the audit log. These last two are read once:
// a reload that changes them warns that a restart applies it (the
// certificate files themselves are re-read when they change).
func (d *Daemon) secure(cfg *spec.Config, listen string) error {
	creds, err := security.NewCredentials(cfg, d.opts.Token, listen)
	if err != nil {
		return err
	}
	d.creds.Store(creds)
	switch {
	case cfg.TLS != nil:
		if d.tls, err = security.NewTLSFiles(cfg.TLS, d.opts.CAFile, d.log.With("component", "tls")); err != nil {
			return err
		}
	case d.opts.CAFile != "":
		if d.roots, err = security.ReadPool([]string{d.opts.CAFile}); err != nil {
			return fmt.Errorf("RPD_CA_FILE: %w", err)
		}
	}
	d.audit, err = security.OpenAudit(cfg.AuditLog, d.opts.Stdout, d.sec, d.log.With("component", "audit"))
	return err
}

// scheme is the URL scheme of this daemon's API.
func (d *Daemon) scheme() string {
	if d.tls != nil {
		return "https://"
	}
	return "http://"
}

// warnRestartOnly logs the settings of cfg that only a restart applies.
func (d *Daemon) warnRestartOnly(cfg *spec.Config) {
	prev := d.reloader.state().cfg
	if prev == nil {
		prev = d.base
	}
	if !reflect.DeepEqual(tlsFilesOf(prev.TLS), tlsFilesOf(cfg.TLS)) {
		d.log.Warn("the tls block changed in the configuration; it takes effect when the daemon restarts (the certificate files themselves are re-read when they change)")
	}
	if prev.AuditLog != cfg.AuditLog {
		d.log.Warn("audit_log changed in the configuration; it takes effect when the daemon restarts", "writing", d.base.AuditLog, "configured", cfg.AuditLog)
	}
	if prev.Backend.NormalPrioritySync != cfg.Backend.NormalPrioritySync {
		d.log.Warn("the local backend's realtime_sync changed in the configuration; it takes effect when the daemon restarts", "configured", !cfg.Backend.NormalPrioritySync)
	}
}

// tlsFilesOf is t without its source range, for comparison.
func tlsFilesOf(t *spec.TLS) *spec.TLS {
	if t == nil {
		return nil
	}
	c := *t
	c.DeclRange = hcl.Range{}
	return &c
}

// forwardTLS makes the forwarder's transport reach an https leader:
// verified with the TLS files (and presenting this daemon's certificate
// under mutual TLS), or, on a daemon that serves plain HTTP, with
// RPD_CA_FILE (else the system's roots).
func (d *Daemon) forwardTLS(t *http.Transport, dialer *net.Dialer) {
	switch {
	case d.tls != nil:
		t.DialTLSContext = d.tls.DialTLS(dialer)
	case d.roots != nil:
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: d.roots}
	}
}
