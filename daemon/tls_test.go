package daemon

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/daemon/internal/security"
	"github.com/rpdhq/rpd/internal/tlstest"
)

// tlsRPD is an rpd block serving TLS with ca's certificate for
// 127.0.0.1, with mutual TLS when clientScopes is not empty.
func tlsRPD(t testing.TB, ca *tlstest.CA, state, clientScopes string) string {
	t.Helper()
	certFile, keyFile := ca.Files("server")
	ca.ServerCert("rpd-replica", certFile, keyFile)
	mtls := ""
	if clientScopes != "" {
		mtls = fmt.Sprintf("    client_ca_file = %q\n    client_scopes  = %s\n", ca.CAFile, clientScopes)
	}
	return fmt.Sprintf("rpd {\n  stack = \"t\"\n  backend \"local\" { path = %q }\n  audit_log = %q\n  tls {\n    cert_file = %q\n    key_file  = %q\n%s  }\n}\n",
		filepath.Join(state, "state.db"), filepath.Join(state, "audit.jsonl"), certFile, keyFile, mtls)
}

// httpsClient trusts ca and presents cert, when given; it speaks HTTP/2.
func httpsClient(ca *tlstest.CA, cert ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ca.Pool(), Certificates: cert},
		ForceAttemptHTTP2: true,
	}}
}

func do(t *testing.T, c *http.Client, method, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMutualTLS: over HTTP/2 and TLS, a verified client certificate is a
// principal (named after its subject, with client_scopes) that holds what
// it takes; a bearer token still works; plain HTTP gets no data; a
// certificate of another CA is refused.
func TestMutualTLS(t *testing.T) {
	ca := tlstest.New(t)
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "rpd.hcl"), tlsRPD(t, ca, state, `["work", "read"]`))
	writeFile(t, filepath.Join(dir, "tokens.hcl"), tokenBlocks(t, state))
	writeFile(t, filepath.Join(dir, "main.hcl"), securedHCL)
	td := startDaemonIn(t, dir, state)
	base := "https://" + td.addr
	runner := httpsClient(ca, ca.ClientCert("runner-1"))

	resp, b := do(t, runner, http.MethodPost, base+"/v1/pools/db/acquire", `{"task_id":"job"}`)
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("acquire with a client certificate: %s %d %s; want 200 over HTTP/2", resp.Proto, resp.StatusCode, b)
	}
	var l api.Lease
	if err := json.Unmarshal([]byte(b), &l); err != nil {
		t.Fatal(err)
	}
	resp, b = do(t, runner, http.MethodGet, base+"/v1/leases", "")
	if !strings.Contains(b, `"principal":"cert:CN=runner-1,O=rpd tests"`) {
		t.Fatalf("GET /v1/leases: %d %s; want the certificate's subject as the principal", resp.StatusCode, b)
	}
	// Another certificate is another principal; a token without one works.
	resp, b = do(t, httpsClient(ca, ca.ClientCert("runner-2")), http.MethodDelete, base+"/v1/leases/"+l.LeaseID, "")
	wantAPIError(t, resp.StatusCode, b, http.StatusForbidden, api.CodeForbidden)
	anon := httpsClient(ca)
	if resp, b = do(t, anon, http.MethodGet, base+"/v1/status", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no certificate, no token: %d %s; want 401", resp.StatusCode, b)
	}
	if resp, b = do(t, anon, http.MethodGet, base+"/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz without credentials: %d %s; want 200 (probes)", resp.StatusCode, b)
	}
	// The status page over TLS: its HTML without credentials, its data with
	// a read token.
	if resp, b = do(t, anon, http.MethodGet, base+"/", ""); resp.StatusCode != http.StatusOK || !strings.Contains(b, "<html") {
		t.Fatalf("the status page over TLS: %d %.200s", resp.StatusCode, b)
	}
	if resp, b = do(t, anon, http.MethodGet, base+"/v1/status", "", "Authorization", "Bearer "+testSecrets["reader"]); resp.StatusCode != http.StatusOK {
		t.Fatalf("the status page's data over TLS with a read token: %d %s", resp.StatusCode, b)
	}
	if resp, b = do(t, anon, http.MethodDelete, base+"/v1/leases/"+l.LeaseID, "", "Authorization", "Bearer "+testSecrets["admin"]); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("release by an admin token over TLS: %d %s", resp.StatusCode, b)
	}
	// Plain HTTP on the TLS port gets no data.
	if resp, err := http.Get("http://" + td.addr + "/v1/status"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "config_version") {
			t.Fatalf("plain HTTP on the TLS port: %d %s", resp.StatusCode, body)
		}
	}
	// A certificate another CA signed fails the handshake.
	stranger := tlstest.New(t)
	c := httpsClient(ca, stranger.ClientCert("intruder"))
	if _, err := c.Get(base + "/v1/status"); err == nil {
		t.Fatal("a client certificate of an unknown CA was accepted")
	}
	// A client cannot claim a principal through the replicas' header.
	resp, b = do(t, httpsClient(ca, ca.ClientCert("runner-3")), http.MethodPost, base+"/v1/pools/db/acquire", `{}`,
		security.PrincipalHeader, "cert:CN=runner-1,O=rpd tests", security.ForwardedHeader, "someone")
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(b), &l) != nil {
		t.Fatalf("acquire by runner-3: %d %s", resp.StatusCode, b)
	}
	if got := leaseOwner(t, td.d, l.LeaseID); got != "cert:CN=runner-3,O=rpd tests" {
		t.Fatalf("a lease taken with a forged %s header is owned by %q; want it owned by the certificate that took it", security.PrincipalHeader, got)
	}
}

// TestForwardOverTLS: a standby forwards to its leader over TLS, verifying
// it, and a client certificate's principal reaches the leader as itself:
// the grant is the runner's, not the standby's.
func TestForwardOverTLS(t *testing.T) {
	ca := tlstest.New(t)
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "rpd.hcl"), tlsRPD(t, ca, state, `["work", "read"]`))
	writeFile(t, filepath.Join(dir, "tokens.hcl"), tokenBlocks(t, state))
	writeFile(t, filepath.Join(dir, "main.hcl"), securedHCL)
	leader := startDaemonIn(t, dir, state)
	standby := startDaemonIn(t, dir, state)
	if !leader.d.arbitrating() || standby.d.arbitrating() {
		t.Fatal("the first daemon does not lead")
	}
	if l := standby.d.elector.View(); !strings.HasPrefix(l.Address, "https://") {
		t.Fatalf("the leader advertises %q; want an https:// address", l.Address)
	}
	runner := httpsClient(ca, ca.ClientCert("runner-1"))
	resp, b := do(t, runner, http.MethodPost, "https://"+standby.addr+"/v1/pools/db/acquire", `{"task_id":"job"}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("acquire through the standby: %d %s", resp.StatusCode, b)
	}
	var l api.Lease
	if err := json.Unmarshal([]byte(b), &l); err != nil {
		t.Fatal(err)
	}
	if got := leaseOwner(t, leader.d, l.LeaseID); got != "cert:CN=runner-1,O=rpd tests" {
		t.Fatalf("the leader's lease is owned by %q; want it owned by the runner's certificate", got)
	}
	resp, b = do(t, httpsClient(ca, ca.ClientCert("runner-2")), http.MethodDelete, "https://"+standby.addr+"/v1/leases/"+l.LeaseID, "")
	wantAPIError(t, resp.StatusCode, b, http.StatusForbidden, api.CodeForbidden)
	// A token goes on as it came.
	resp, b = do(t, runner, http.MethodPost, "https://"+standby.addr+"/v1/leases/"+l.LeaseID+"/heartbeat", "", "Authorization", "Bearer "+testSecrets["other"])
	wantAPIError(t, resp.StatusCode, b, http.StatusForbidden, api.CodeForbidden)
	resp, b = do(t, runner, http.MethodDelete, "https://"+standby.addr+"/v1/leases/"+l.LeaseID, "")
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("release by the holder through the standby: %d %s", resp.StatusCode, b)
	}
	if err := standby.d.leaderReachable(context.Background()); err != nil {
		t.Fatalf("the standby's /readyz check of its leader over TLS: %v", err)
	}
}

// leaseOwner is the principal that holds pool lease id on d.
func leaseOwner(t *testing.T, d *Daemon, id string) string {
	t.Helper()
	win, _ := httpapi.PageBounds[api.Grant](nil)
	if err := d.arb.Grants(url.Values{"kind": {api.KindPool}}, &win); err != nil {
		t.Fatal(err)
	}
	for _, g := range win.Out {
		if g.ID == id {
			return g.Principal
		}
	}
	t.Fatalf("no lease %s held", id)
	return ""
}
