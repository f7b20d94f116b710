package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/security"
	"github.com/rpdhq/rpd/internal/buildinfo"
)

// This file makes a standby show the leader's truth: only the leader
// counts pool slots, permits and claims, so a standby's own components are
// idle copies of the configuration and their figures would read as zeros.
// GET /v1/status on a standby therefore fetches the leader's and shows its
// pools, budgets and ceilings (Source "leader"), or, when the leader does
// not answer, none at all (Source "unavailable", with the reason). The
// arbitrated routes (/v1/pools, /v1/leases, ...) are forwarded whole by
// leaderOnly and need nothing here.

// sourceHeader and leaderHeader mark an answer a standby forwarded: it is
// the leader's (api.SourceLeader), from the leader at that URL.
const (
	sourceHeader = "X-Rpd-Source"
	leaderHeader = "X-Rpd-Leader"
)

// markFromLeader sets them on a forwarded answer's headers h.
func markFromLeader(h http.Header, leader *url.URL) {
	h.Set(sourceHeader, api.SourceLeader)
	h.Set(leaderHeader, leader.Scheme+"://"+leader.Host)
}

// leaderStatusTimeout bounds the standby's fetch of the leader's status:
// a status page must answer promptly even when the leader hangs.
const leaderStatusTimeout = 2 * time.Second

// buildVersion is this binary's version as the API reports it.
func buildVersion() api.BuildVersion {
	bi := buildinfo.Read()
	return api.BuildVersion{Version: bi.Version, Revision: bi.Revision, GoVersion: bi.GoVersion}
}

// statusView is GET /v1/status: the daemon's own status, with the
// leader's figures on a standby. A request another replica forwarded is
// answered from this daemon alone, so that status fetches never loop.
func (d *Daemon) statusView(r *http.Request) api.Status {
	st := d.Status()
	if st.Role == "leader" || r.Header.Get(security.ForwardedHeader) != "" {
		return st
	}
	ls, err := d.leaderStatus(r.Context(), r.Header.Get("Authorization"))
	if err != nil {
		st.Source, st.SourceError = api.SourceUnavailable, err.Error()
		st.Pools, st.Budgets, st.Ceilings = nil, nil, nil
		return st
	}
	st.Source = api.SourceLeader
	st.Pools, st.Budgets, st.Ceilings = ls.Pools, ls.Budgets, ls.Ceilings
	v := ls.Version
	st.LeaderVersion = &v
	return st
}

// leaderStatus fetches the leader's GET /v1/status with the caller's
// credentials (replicas share the token, as forwarding assumes).
func (d *Daemon) leaderStatus(ctx context.Context, authorization string) (api.Status, error) {
	l := d.elector.View()
	if !l.Live(time.Now()) || l.Address == d.elector.Address {
		return api.Status{}, fmt.Errorf("no daemon leads the stack right now, so no pool, budget or ceiling figures are known; a standby takes over when the leader's lease runs out")
	}
	ctx, cancel := context.WithTimeout(ctx, leaderStatusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(l.Address, "/")+"/v1/status", nil)
	if err != nil {
		return api.Status{}, fmt.Errorf("the leader's address %q: %w", l.Address, err)
	}
	req.Header.Set(security.ForwardedHeader, d.elector.Holder)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := d.forward.transport.RoundTrip(req)
	if err != nil {
		d.elector.Wake() // it may have released the lease, or died
		return api.Status{}, fmt.Errorf("the leader at %s does not answer (%w); its figures are unknown until it does or a standby takes over", l.Address, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return api.Status{}, fmt.Errorf("read the leader's status from %s: %w", l.Address, err)
	}
	if resp.StatusCode != http.StatusOK {
		return api.Status{}, fmt.Errorf("the leader at %s answers GET /v1/status with %s: %s", l.Address, resp.Status, strings.TrimSpace(string(body)))
	}
	var ls api.Status
	if err := json.Unmarshal(body, &ls); err != nil {
		return api.Status{}, fmt.Errorf("decode the leader's status from %s: %w", l.Address, err)
	}
	if ls.Role != "leader" {
		return api.Status{}, fmt.Errorf("the daemon at %s no longer leads the stack (the leadership is changing); retry in a moment", l.Address)
	}
	return ls, nil
}
