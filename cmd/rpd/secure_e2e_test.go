package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/internal/tlstest"
)

// The secrets of the end-to-end principals: a worker, another worker, a
// reader; the admin is RPD_TOKEN.
var e2eSecrets = map[string]string{
	"worker": strings.Repeat("w", 40), "other": strings.Repeat("o", 40),
	"reader": strings.Repeat("r", 40), "admin": strings.Repeat("a", 40),
}

// secureConf writes a configuration serving TLS with a certificate of ca
// for 127.0.0.1 (mutual TLS with client certificates of scope work), the
// tokens of e2eSecrets, an audit log under cwd and pool p, and returns the
// daemons' environment.
func secureConf(t *testing.T, ca *tlstest.CA, conf, cwd string) []string {
	t.Helper()
	certFile, keyFile := ca.Files("server")
	ca.ServerCert("rpd-e2e", certFile, keyFile)
	var tokens strings.Builder
	for _, who := range []string{"worker", "other", "reader"} {
		scope := map[string]string{"worker": "work", "other": "work", "reader": "read"}[who]
		sum := sha256.Sum256([]byte(e2eSecrets[who]))
		fmt.Fprintf(&tokens, "token %q {\n  sha256 = %q\n  scopes = [%q]\n}\n", who, hex.EncodeToString(sum[:]), scope)
	}
	writeConf(t, filepath.Join(conf, "main.hcl"), fmt.Sprintf(`rpd {
  stack     = "e2e"
  audit_log = "audit.jsonl"
  ha {
    lease = "2s"
  }
  tls {
    cert_file      = %q
    key_file       = %q
    client_ca_file = %q
    client_scopes  = ["work", "read"]
  }
}
pool "p" {
  slots = 2
}
%s`, certFile, keyFile, ca.CAFile, tokens.String()))
	return []string{"RPD_TOKEN=" + e2eSecrets["admin"], "RPD_CA_FILE=" + ca.CAFile}
}

// call sends a request over TLS as who (a token's name, or "" with only
// the client's certificate) and returns the status and body.
func call(t *testing.T, c *http.Client, who, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+e2eSecrets[who])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func tlsHTTPClient(ca *tlstest.CA, certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: certs}}}
}

// acquire takes a slot of pool p at url as who and returns its lease ID.
func acquire(t *testing.T, c *http.Client, who, url, body string) string {
	t.Helper()
	status, body := call(t, c, who, http.MethodPost, url, body)
	var l api.Lease
	if status != http.StatusOK || json.Unmarshal([]byte(body), &l) != nil || l.LeaseID == "" {
		t.Fatalf("acquire: %d %s", status, body)
	}
	return l.LeaseID
}

// TestSecureE2EMutualTLS: the binary serves TLS; a client certificate is
// a principal that holds what it takes; rpd status reads the daemon over
// https with -ca-file; the audit log names principals and no secret.
func TestSecureE2EMutualTLS(t *testing.T) {
	ca := tlstest.New(t)
	conf, cwd := t.TempDir(), t.TempDir()
	env := secureConf(t, ca, conf, cwd)
	d := startRPD(t, cwd, env, "watch", conf)
	base := "https://" + d.addr

	runner := tlsHTTPClient(ca, ca.ClientCert("runner-1"))
	lease := acquire(t, runner, "", base+"/v1/pools/p/acquire", `{"task_id":"job"}`)
	if st, b := call(t, tlsHTTPClient(ca, ca.ClientCert("runner-2")), "", http.MethodDelete, base+"/v1/leases/"+lease, ""); st != http.StatusForbidden {
		t.Fatalf("release by another certificate: %d %s; want 403", st, b)
	}
	if st, b := call(t, tlsHTTPClient(ca), "", http.MethodGet, base+"/v1/status", ""); st != http.StatusUnauthorized {
		t.Fatalf("neither certificate nor token: %d %s; want 401", st, b)
	}
	if st, b := call(t, runner, "", http.MethodDelete, base+"/v1/leases/"+lease, ""); st != http.StatusNoContent {
		t.Fatalf("release by the holder's certificate: %d %s", st, b)
	}

	wd := &workdir{t: t, dir: t.TempDir(), env: []string{"RPD_TOKEN=" + e2eSecrets["reader"]}}
	r := wd.must(0, "status", "-addr", base, "-ca-file", ca.CAFile, "-json")
	contains(t, r, "stdout", `"role": "leader"`)
	r = wd.must(1, "status", "-addr", base) // the system's roots do not know the test CA
	contains(t, r, "stderr", "certificate")

	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d; log:\n%s", code, d.stderr)
	}
	audit, err := os.ReadFile(filepath.Join(cwd, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"principal":"cert:CN=runner-1,O=rpd tests"`, `"principal":"cert:CN=runner-2,O=rpd tests"`, `"status":403`, lease} {
		if !strings.Contains(string(audit), want) {
			t.Errorf("the audit log lacks %s:\n%s", want, audit)
		}
	}
	for who, s := range e2eSecrets {
		if strings.Contains(string(audit), s) || strings.Contains(d.stderr.String(), s) {
			t.Errorf("the secret of %s is in the audit log or the daemon's log", who)
		}
	}
}

// TestSecureE2ERunOverTLS: rpd run acquires, runs and releases over https,
// verifying the daemon with -ca-file (or RPD_CA_FILE), as a work token.
func TestSecureE2ERunOverTLS(t *testing.T) {
	ca := tlstest.New(t)
	conf, cwd := t.TempDir(), t.TempDir()
	env := secureConf(t, ca, conf, cwd)
	d := startRPD(t, cwd, env, "watch", conf)
	base := "https://" + d.addr

	wd := &workdir{t: t, dir: t.TempDir(), env: []string{"RPD_TOKEN=" + e2eSecrets["worker"]}}
	r := wd.must(0, "run", "-addr", base, "-ca-file", ca.CAFile, "-pool", "p", "--", "sh", "-c", "echo ran-over-tls")
	contains(t, r, "stdout", "ran-over-tls")
	wd.env = append(wd.env, "RPD_CA_FILE="+ca.CAFile)
	r = wd.must(3, "run", "-addr", base, "-pool", "p", "--", "sh", "-c", "exit 3")
	if ps := d.pool("p"); ps.Used != 0 {
		t.Fatalf("after rpd run: pool p %+v; want every slot back", ps)
	}
	// A read token may not take a slot.
	wd.env = []string{"RPD_TOKEN=" + e2eSecrets["reader"], "RPD_CA_FILE=" + ca.CAFile}
	r = wd.rpd("run", "-addr", base, "-pool", "p", "-wait", "5s", "--", "true")
	if r.code == 0 {
		t.Fatalf("rpd run with a read token: %s; want a refusal", r)
	}
	contains(t, r, "stderr", "403")
}

// TestSecureE2EForwardingFailover: a standby forwards to its leader over
// TLS (verifying it, presenting its own certificate); leases keep their
// principal across a kill -9 of the leader: the new leader still refuses
// another principal and serves the holder.
func TestSecureE2EForwardingFailover(t *testing.T) {
	ca := tlstest.New(t)
	conf, cwd := t.TempDir(), t.TempDir()
	env := secureConf(t, ca, conf, cwd)
	a := startRPD(t, cwd, env, "watch", conf)
	b := startRPD(t, cwd, env, "watch", conf)
	leader := leaderOf(t, a, b)
	standby := a
	if leader == a {
		standby = b
	}
	via := "https://" + standby.addr
	c := tlsHTTPClient(ca)
	runner := tlsHTTPClient(ca, ca.ClientCert("runner-1"))
	byToken := acquire(t, c, "worker", via+"/v1/pools/p/acquire", `{"task_id":"tok","ttl_seconds":60}`)
	byCert := acquire(t, runner, "", via+"/v1/pools/p/acquire", `{"task_id":"cert","ttl_seconds":60}`)

	if code := leader.stop(syscall.SIGKILL); code != -9 {
		t.Fatalf("kill -9: %d", code)
	}
	standby.waitStatus("the standby to take over", func(st api.Status) bool { return st.Role == "leader" })
	if ps := standby.pool("p"); ps.Used != 2 {
		t.Fatalf("after the failover pool p = %+v; want both leases restored", ps)
	}
	for _, lease := range []string{byToken, byCert} {
		if st, body := call(t, c, "other", http.MethodPost, via+"/v1/leases/"+lease+"/heartbeat", ""); st != http.StatusForbidden {
			t.Errorf("heartbeat of %s by another worker after the failover: %d %s; want 403", lease, st, body)
		}
	}
	if st, body := call(t, c, "worker", http.MethodPost, via+"/v1/leases/"+byToken+"/heartbeat", ""); st != http.StatusOK {
		t.Errorf("heartbeat by the holder after the failover: %d %s", st, body)
	}
	if st, body := call(t, runner, "", http.MethodDelete, via+"/v1/leases/"+byCert, ""); st != http.StatusNoContent {
		t.Errorf("release by the holder's certificate after the failover: %d %s", st, body)
	}
	if st, body := call(t, c, "worker", http.MethodDelete, via+"/v1/leases/"+byToken, ""); st != http.StatusNoContent {
		t.Errorf("release by the holder after the failover: %d %s", st, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := standby.c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
}
