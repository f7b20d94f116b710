package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority whose certificate is in CAFile.
type CA struct {
	t      testing.TB
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	CAFile string
	serial int64
}

// New makes a CA in a new temporary directory of t.
func New(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "rpd-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{t: t, dir: t.TempDir(), cert: cert, key: key, serial: 100}
	ca.CAFile = filepath.Join(ca.dir, "ca.crt")
	writePEM(t, ca.CAFile, "CERTIFICATE", der)
	return ca
}

// Pool is the CA as a certificate pool.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// ServerCert writes a certificate for 127.0.0.1 and localhost (usable for
// client authentication too, as the replicas of a stack present theirs to
// their leader) with the given common name to certFile and keyFile,
// replacing them atomically (key first), and returns its serial number.
func (ca *CA) ServerCert(cn, certFile, keyFile string) *big.Int {
	ca.t.Helper()
	return ca.issue(cn, certFile, keyFile, []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
}

// ClientCert returns a client certificate with the given common name.
func (ca *CA) ClientCert(cn string) tls.Certificate {
	ca.t.Helper()
	certFile, keyFile := filepath.Join(ca.dir, cn+".crt"), filepath.Join(ca.dir, cn+".key")
	ca.issue(cn, certFile, keyFile, nil, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		ca.t.Fatal(err)
	}
	return c
}

// Files returns the paths of a new server certificate and key in the CA's
// directory, named after name.
func (ca *CA) Files(name string) (certFile, keyFile string) {
	return filepath.Join(ca.dir, name+".crt"), filepath.Join(ca.dir, name+".key")
}

func (ca *CA) issue(cn, certFile, keyFile string, ips []net.IP, names []string, usage []x509.ExtKeyUsage) *big.Int {
	t := ca.t
	key := newKey(t)
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"rpd tests"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		IPAddresses:  ips,
		DNSNames:     names,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	writePEM(t, certFile, "CERTIFICATE", der)
	return tmpl.SerialNumber
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// writePEM writes one PEM block to path through a rename, so that a reader
// sees the old file or the new one, never half of one.
func writePEM(t testing.TB, path, typ string, der []byte) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
