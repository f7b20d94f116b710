package daemon

import (
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/security"
)

// auditReloadSince writes the audit line of the reload that ran if the
// last reload's time moved past since (an unchanged snapshot the watcher
// saw again is no reload). Called on the reloader's owner.
func (d *Daemon) auditReloadSince(since time.Time, forced bool) {
	res := d.reloader.state().last
	if d.audit == nil || res.At.Equal(since) {
		return
	}
	trigger := "watch"
	switch {
	case d.opts.Mode == ModeServe && !forced:
		trigger = "state"
	case forced:
		trigger = "reload" // SIGHUP, or POST /v1/reload (audited with its principal)
	}
	d.auditReload(trigger, res)
}

// auditReload writes the audit line of a reload or apply.
func (d *Daemon) auditReload(trigger string, res api.ReloadResult) {
	ok := res.OK
	d.audit.Add(security.AuditEntry{Time: time.Now().UTC(), Event: "reload", Principal: "daemon", OK: &ok, ConfigVersion: res.ConfigVersion,
		Changed: res.Changed, Reason: res.Error, Trigger: trigger})
}
