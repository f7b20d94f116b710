package daemon

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the daemon's own series, on a registry of its own (never the
// global one, so two daemons in one test process do not collide).
type metrics struct {
	reg           *prometheus.Registry
	lastOK        prometheus.Gauge
	lastSuccessTS prometheus.Gauge
	reloads       *prometheus.CounterVec
	version       prometheus.Gauge
	obs           *observability
}

func newMetrics(d *Daemon) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rpd_config_last_reload_successful", Help: "1 if the last configuration reload succeeded, else 0."}),
		lastSuccessTS: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rpd_config_last_reload_success_timestamp_seconds", Help: "Unix time of the last successful reload."}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rpd_config_reloads_total", Help: "Reload attempts by result (success, failure)."}, []string{"result"}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rpd_config_version", Help: "Version of the active configuration; increments on every reload that changes something."}),
	}
	m.obs = newObservability(m.reg)
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	leader := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rpd_leader", Help: "1 while this daemon leads its stack (arbitrates pools, budgets and VM ceilings), 0 on a standby."},
		func() float64 { return b2f(d.elector != nil && d.arbitrating()) })
	epoch := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rpd_leader_epoch", Help: "The stack's leader epoch (fencing token) as this daemon last saw it."},
		func() float64 {
			if d.elector == nil {
				return 0
			}
			return float64(d.elector.View().Epoch)
		})
	changes := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "rpd_leader_changes_total", Help: "Changes of the stack's leader (epoch) this daemon saw."},
		func() float64 {
			if d.elector == nil {
				return 0
			}
			return float64(d.elector.Changes.Load())
		})
	matches := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rpd_config_matches_leader", Help: "1 when this daemon's configuration hash is the one the leader recorded, 0 when the files differ (or no leader is known)."},
		func() float64 {
			if d.elector == nil {
				return 0
			}
			return b2f(d.Status().ConfigMatchesLeader)
		})
	early := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "rpd_http_answers_sent_early_total", Help: "Answers of acquires and heartbeats (pool leases) sent by the grant journal's writer the moment their record was durable, instead of by the request's goroutine once woken (plain HTTP, local backend)."},
		func() float64 {
			if s := d.plain.Load(); s != nil {
				return float64(s.EarlyAnswers())
			}
			return 0
		})
	bv := buildVersion()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rpd_build_info", Help: "Always 1; the labels name the rpd build this daemon runs (several values across replicas: a rolling update is under way, or stuck).",
		ConstLabels: prometheus.Labels{"version": bv.Version, "revision": bv.Revision, "goversion": bv.GoVersion}})
	build.Set(1)
	m.reg.MustRegister(leader, epoch, changes, matches, early, build)
	m.reg.MustRegister(m.lastOK, m.lastSuccessTS, m.reloads, m.version,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

func (d *Daemon) metricsHandler() http.Handler {
	return promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{ErrorLog: nil})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
