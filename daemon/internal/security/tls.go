package security

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/rpdhq/rpd/spec"
)

// This file holds the daemon's TLS: the server side of every listener, and
// the client side a standby forwards to its leader with. Certificates,
// keys and CA bundles are files (Kubernetes mounts a secret's new version
// by swapping a symlink): each is re-read when its modification time or
// size changes, looked at no more than once per fileCheckInterval, so that
// a rotation needs no restart and a handshake costs no stat in between.

// fileCheckInterval is how often the TLS files are looked at.
const fileCheckInterval = time.Second

// tlsFiles serves the parsed contents of the TLS files, re-read when they
// change. A file that does not parse (a rotation half done: the key
// written, not yet the certificate) keeps the last good contents in use,
// logged once per change, and is tried again at the next look.
type TLSFiles struct {
	certFile, keyFile string
	caFiles           []string // client_ca_file (mTLS), read into clientCAs
	rootFiles         []string // the CAs the leader is verified with
	log               *slog.Logger
	// interval is fileCheckInterval (tests shorten it).
	interval time.Duration

	mu        sync.Mutex
	checked   time.Time
	stamps    map[string]fileStamp
	cert      *tls.Certificate
	subject   string // cert's leaf subject, for recognising a replica
	clientCAs *x509.CertPool
	roots     *x509.CertPool
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// newTLSFiles reads the files of t (and caFile, the RPD_CA_FILE of the
// daemon's client side) once; any that cannot be read or parsed fails.
func NewTLSFiles(t *spec.TLS, caFile string, log *slog.Logger) (*TLSFiles, error) {
	f := &TLSFiles{certFile: t.CertFile, keyFile: t.KeyFile, log: log, interval: fileCheckInterval, stamps: map[string]fileStamp{}}
	if t.ClientCAFile != "" {
		f.caFiles = []string{t.ClientCAFile}
	}
	switch {
	case caFile != "":
		f.rootFiles = []string{caFile}
	case t.CAFile != "":
		f.rootFiles = []string{t.CAFile}
	case t.ClientCAFile != "":
		f.rootFiles = []string{t.ClientCAFile}
	}
	if err := f.load(); err != nil {
		return nil, err
	}
	f.checked = time.Now()
	return f, nil
}

// load reads every file and swaps the parsed contents in. Called with mu
// held (or before f is shared).
func (f *TLSFiles) load() error {
	stamps := map[string]fileStamp{}
	for _, name := range f.Names() {
		st, err := os.Stat(name)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		stamps[name] = fileStamp{mod: st.ModTime(), size: st.Size()}
	}
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return fmt.Errorf("tls: certificate %s with key %s: %w; give a PEM certificate chain and its PEM private key", f.certFile, f.keyFile, err)
	}
	clientCAs, err := ReadPool(f.caFiles)
	if err != nil {
		return err
	}
	roots, err := ReadPool(f.rootFiles)
	if err != nil {
		return err
	}
	f.cert, f.subject, f.clientCAs, f.roots, f.stamps = &cert, cert.Leaf.Subject.String(), clientCAs, roots, stamps
	return nil
}

func (f *TLSFiles) Names() []string {
	out := []string{f.certFile, f.keyFile}
	out = append(out, f.caFiles...)
	return append(out, f.rootFiles...)
}

// readPool reads PEM CA bundles; no file is a nil pool (the system's).
func ReadPool(files []string) (*x509.CertPool, error) {
	if len(files) == 0 {
		return nil, nil
	}
	pool := x509.NewCertPool()
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("tls: CA file: %w", err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("tls: CA file %s holds no PEM certificate", name)
		}
	}
	return pool, nil
}

// refresh re-reads the files if one of them changed since the last look,
// at most once per fileCheckInterval.
func (f *TLSFiles) refresh() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if now.Sub(f.checked) < f.interval {
		return
	}
	f.checked = now
	changed := false
	for _, name := range f.Names() {
		st, err := os.Stat(name)
		if err != nil || f.stamps[name] != (fileStamp{mod: st.ModTime(), size: st.Size()}) {
			changed = true
			break
		}
	}
	if !changed {
		return
	}
	old := f.stamps
	if err := f.load(); err != nil {
		// Keep serving the last good certificate; look again next time,
		// but log once per state of the files.
		f.stamps = map[string]fileStamp{}
		if len(old) > 0 {
			f.log.Warn("TLS files changed but cannot be loaded; serving the previous certificate until they can", "err", err)
		}
		return
	}
	f.log.Info("TLS files re-read", "cert_file", f.certFile, "subject", f.subject, "not_after", f.cert.Leaf.NotAfter)
}

func (f *TLSFiles) certificate() *tls.Certificate {
	f.refresh()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cert
}

// isReplica reports whether a verified client certificate is this
// daemon's own kind: the same subject as the certificate it serves, as
// the replicas of a stack share one (a Kubernetes secret).
func (f *TLSFiles) IsReplica(leaf *x509.Certificate) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return leaf != nil && leaf.Subject.String() == f.subject && bytes.Equal(leaf.RawSubject, f.cert.Leaf.RawSubject)
}

// serverConfig is the TLS configuration of the listeners: TLS 1.2 and up,
// HTTP/2 offered, and with client CAs a client certificate asked for and
// verified when one is given (requests without one authenticate with a
// bearer token instead; probes need neither).
func (f *TLSFiles) ServerConfig() *tls.Config {
	base := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return f.certificate(), nil
		},
	}
	if len(f.caFiles) == 0 {
		return base
	}
	base.ClientAuth = tls.VerifyClientCertIfGiven
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		f.refresh()
		f.mu.Lock()
		pool := f.clientCAs
		f.mu.Unlock()
		c := base.Clone()
		c.GetConfigForClient = nil
		c.ClientCAs = pool
		return c, nil
	}
	return base
}

// clientConfig is the TLS configuration a standby reaches its leader at
// host with: the leader verified against the CA files (else the system's
// roots) as they are now, and with mutual TLS this daemon's own
// certificate presented.
func (f *TLSFiles) ClientConfig(host string) *tls.Config {
	f.refresh()
	f.mu.Lock()
	roots := f.roots
	f.mu.Unlock()
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, ServerName: host}
	if len(f.caFiles) > 0 {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return f.certificate(), nil
		}
	}
	return c
}

// dialTLS dials addr and completes a TLS handshake verified by
// clientConfig; it is the forwarder's DialTLSContext.
func (f *TLSFiles) DialTLS(dialer *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		d := tls.Dialer{NetDialer: dialer, Config: f.ClientConfig(host)}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, fmt.Errorf("TLS to the leader at %s: %w (check that its certificate names that host and is signed by ca_file, client_ca_file or RPD_CA_FILE)", addr, err)
		}
		return c, nil
	}
}
