package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
)

// TLS is the tls: section. With a certificate and its key, serve speaks
// https and wss only (TLS 1.2 at least); with client_ca_file too, every
// client must present a certificate that CA signed (mutual TLS), and the
// certificate's common name is the client's principal. Empty, serve speaks
// plain http and ws.
//
// The files are read again on SIGHUP and whenever they change on disk; a
// new pair that does not load is refused and the one loaded before keeps
// serving. The key is a file of its own the config only names: no part of
// the config holds key material.
type TLS struct {
	// CertFile is the server's certificate chain (PEM), the leaf first.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the private key of CertFile's leaf (PEM).
	KeyFile string `yaml:"key_file"`
	// ClientCAFile, when set, holds the CA certificates (PEM) that sign
	// the client certificates serve accepts; a client without one is
	// refused during the handshake.
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether the section asks for TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.ClientCAFile != "" }

// Mutual reports whether clients must present a certificate.
func (t TLS) Mutual() bool { return t.ClientCAFile != "" }

// Load reads the certificate and key, checking that the key is the
// certificate's, and the client CA pool when ClientCAFile is set (nil
// otherwise). Errors name the key and the file.
func (t TLS) Load() (*tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, nil, keyErrorf("tls.cert_file", "tls.cert_file %s and tls.key_file %s do not load as a certificate and its key: %v; "+
			"give the PEM certificate chain (leaf first) and the PEM private key of that leaf", t.CertFile, t.KeyFile, err)
	}
	if len(cert.Certificate) > 0 && cert.Leaf == nil {
		cert.Leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	}
	if t.ClientCAFile == "" {
		return &cert, nil, nil
	}
	pem, err := os.ReadFile(t.ClientCAFile)
	if err != nil {
		return nil, nil, keyError("tls.client_ca_file", fmt.Errorf("tls.client_ca_file: %w", err))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, keyErrorf("tls.client_ca_file", "tls.client_ca_file %s holds no PEM certificate; give the certificate(s) of the CA that signs your clients' certificates", t.ClientCAFile)
	}
	return &cert, pool, nil
}

// Validate checks the section: empty, or a certificate and its key that
// load (and a client CA file that does, when given).
func (t TLS) Validate() error {
	if !t.Enabled() {
		return nil
	}
	switch {
	case t.CertFile == "" && t.KeyFile == "":
		return keyErrorf("tls.client_ca_file", "tls.client_ca_file is set but tls.cert_file and tls.key_file are not; mutual TLS needs the server's own certificate and key too")
	case t.CertFile == "":
		// Named by the key that is set: its file and line are the ones to fix.
		return keyErrorf("tls.key_file", "tls.key_file is set but tls.cert_file is empty; give both, or neither to serve without TLS")
	case t.KeyFile == "":
		return keyErrorf("tls.cert_file", "tls.cert_file is set but tls.key_file is empty; give both, or neither to serve without TLS")
	}
	_, _, err := t.Load()
	return err
}

// resolve makes the section's relative paths relative to dir (the config
// file's directory), for those the file gave.
func (t *TLS) resolve(dir string, inFile func(key string) bool) {
	for _, f := range []struct {
		key  string
		path *string
	}{
		{"tls.cert_file", &t.CertFile},
		{"tls.key_file", &t.KeyFile},
		{"tls.client_ca_file", &t.ClientCAFile},
	} {
		if *f.path != "" && !filepath.IsAbs(*f.path) && inFile(f.key) {
			*f.path = filepath.Join(dir, *f.path)
		}
	}
}

// Mode names how serve speaks: off, on, or mutual (client certificates
// required).
func (t TLS) Mode() string {
	switch {
	case !t.Enabled():
		return "off"
	case t.Mutual():
		return "mutual"
	}
	return "on"
}
