package wire

import (
	"crypto/x509"
	"errors"
	"os"
)

// ErrNoCertificate is RootsWithCAFile's answer for a file that holds no PEM
// certificate.
var ErrNoCertificate = errors.New("holds no PEM certificate")

// RootsWithCAFile returns the system's CA pool (an empty one where the
// system has none) with the certificates of the PEM file at path added: the
// roots of a client that trusts a private CA beside the public ones. The
// error is the file's read error, or ErrNoCertificate; callers word it for
// the flag or key that named the file.
func RootsWithCAFile(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, ErrNoCertificate
	}
	return pool, nil
}
