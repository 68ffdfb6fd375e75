// Package tlstest makes throwaway certificates for tests that run real
// servers over TLS: a certificate authority made for the test, a server
// certificate it signs for 127.0.0.1 and localhost, and a client
// certificate it signs for mutual TLS. Everything is generated when the test
// runs (ECDSA P-256, valid for a day) and written as PEM files into a
// directory the test owns: no key is ever committed. The package needs only
// the standard library.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// ClientCommonName is the subject common name of the client certificate
// (etcd takes it as the user name when its authentication is on).
const ClientCommonName = "kvbreaker-test-client"

// PKI is one test's certificate authority and the certificates it signed,
// as PEM files in Dir.
type PKI struct {
	// Dir holds the files.
	Dir string
	// CAFile is the authority's certificate: what a client trusts
	// (etcdctl --cacert, redis-cli --cacert, psql sslrootcert).
	CAFile string
	// ServerCertFile and ServerKeyFile are the server's certificate, for
	// 127.0.0.1, ::1 and localhost, and its key.
	ServerCertFile, ServerKeyFile string
	// ClientCertFile and ClientKeyFile are a client certificate (common
	// name ClientCommonName) and its key, for mutual TLS.
	ClientCertFile, ClientKeyFile string

	caPool *x509.CertPool
	client tls.Certificate
}

// New makes a certificate authority named name and its server and client
// certificates, and writes them into dir (keys with mode 0600).
func New(dir, name string) (*PKI, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tlstest: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"kvbreaker tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("tlstest: CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("tlstest: CA: %w", err)
	}
	p := &PKI{
		Dir:            dir,
		CAFile:         filepath.Join(dir, "ca.pem"),
		ServerCertFile: filepath.Join(dir, "server.pem"),
		ServerKeyFile:  filepath.Join(dir, "server-key.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"),
		ClientKeyFile:  filepath.Join(dir, "client-key.pem"),
		caPool:         x509.NewCertPool(),
	}
	p.caPool.AddCert(ca)
	if err := writePEM(p.CAFile, "CERTIFICATE", caDER, 0o644); err != nil {
		return nil, err
	}
	leaf := func(cn string, usage x509.ExtKeyUsage, server bool, certFile, keyFile string) (tls.Certificate, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("tlstest: %w", err)
		}
		t := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if server {
			t.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
			t.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, t, ca, &key.PublicKey, caKey)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("tlstest: %s: %w", cn, err)
		}
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("tlstest: %w", err)
		}
		if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
			return tls.Certificate{}, err
		}
		if err := writePEM(keyFile, "PRIVATE KEY", kb, 0o600); err != nil {
			return tls.Certificate{}, err
		}
		return tls.LoadX509KeyPair(certFile, keyFile)
	}
	if _, err := leaf("127.0.0.1", x509.ExtKeyUsageServerAuth, true, p.ServerCertFile, p.ServerKeyFile); err != nil {
		return nil, err
	}
	if p.client, err = leaf(ClientCommonName, x509.ExtKeyUsageClientAuth, false, p.ClientCertFile, p.ClientKeyFile); err != nil {
		return nil, err
	}
	return p, nil
}

// MustNew is New in a directory of tb's, failing tb on error.
func MustNew(tb testing.TB, name string) *PKI {
	tb.Helper()
	p, err := New(tb.TempDir(), name)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// ClientConfig is a client's TLS configuration: it trusts the authority
// and presents the client certificate.
func (p *PKI) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: p.caPool, Certificates: []tls.Certificate{p.client}, MinVersion: tls.VersionTLS12}
}

// ServerOnlyConfig trusts the authority and presents no client
// certificate.
func (p *PKI) ServerOnlyConfig() *tls.Config {
	return &tls.Config{RootCAs: p.caPool, MinVersion: tls.VersionTLS12}
}

// serial numbers the certificates: unique per authority is all a
// verifier needs.
var serials atomic.Int64

func serial() *big.Int { return big.NewInt(serials.Add(1)) }

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, b, mode); err != nil {
		return fmt.Errorf("tlstest: %w", err)
	}
	return nil
}
