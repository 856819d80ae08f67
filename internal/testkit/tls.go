// A certificate authority and the certificates it signs, minted in memory,
// for the tests that run streamcast over TLS (the broker's, the client's,
// the CLI scripts'). It uses crypto/x509 only, so no test needs openssl.

package testkit

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
	"time"
)

// CA is a certificate authority that signs server and client certificates.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// NewCA mints a self-signed CA named name, valid from an hour ago for a day.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}, nil
}

// Pool is a pool holding the CA alone, for a client's RootCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteCert writes the CA's certificate (PEM) to path, for a client's
// --ca-file or a server's tls.client_ca_file.
func (ca *CA) WriteCert(path string) error { return writeAtomic(path, ca.CertPEM) }

// Pair is a certificate and its key, PEM-encoded, with the parsed leaf.
type Pair struct {
	CertPEM, KeyPEM []byte
	Leaf            *x509.Certificate
}

// TLS returns the pair as a tls.Certificate (for a client's Certificates).
func (p Pair) TLS() tls.Certificate {
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		panic(fmt.Sprintf("tlstest: a pair this package minted does not load: %v", err)) // cannot happen
	}
	return c
}

// Write writes the pair to certFile and keyFile, each through a temporary
// file renamed over it, so a reader never sees half a file.
func (p Pair) Write(certFile, keyFile string) error {
	if err := writeAtomic(certFile, p.CertPEM); err != nil {
		return err
	}
	return writeAtomic(keyFile, p.KeyPEM)
}

// Server mints a server certificate for 127.0.0.1, ::1 and localhost with
// the common name cn.
func (ca *CA) Server(cn string) (Pair, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client mints a client certificate with the common name cn.
func (ca *CA) Client(cn string) (Pair, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(tmpl *x509.Certificate) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		Leaf:    leaf,
	}, nil
}

// WriteTLSFiles mints a CA and, signed by it, a server certificate for
// 127.0.0.1 and a client certificate with the common name client, and
// writes them under dir: ca.crt, server.crt, server.key, client.crt,
// client.key. The CLI scripts use it.
func WriteTLSFiles(dir, client string) error {
	ca, err := NewCA("streamcast test CA")
	if err != nil {
		return err
	}
	srv, err := ca.Server("streamcast test server")
	if err != nil {
		return err
	}
	cl, err := ca.Client(client)
	if err != nil {
		return err
	}
	if err := ca.WriteCert(filepath.Join(dir, "ca.crt")); err != nil {
		return err
	}
	if err := srv.Write(filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")); err != nil {
		return err
	}
	return cl.Write(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return n
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
