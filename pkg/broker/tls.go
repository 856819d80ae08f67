package broker

import (
	"net/http"
	"time"
)

// This file is the server's TLS (the tls: section) as the broker sees it:
// package certs holds the certificate every new handshake gets; here is the
// principal a client certificate names.

// DefaultCertPollInterval is how often the tls: files are checked for a
// change on disk when Options.CertPollInterval is 0.
const DefaultCertPollInterval = 2 * time.Second

// PrincipalFromTLS returns the principal a request's client certificate
// names: the common name of the verified leaf, when the server runs mutual
// TLS (tls.client_ca_file) and the name is not empty. ok is false for a
// request without a verified client certificate, over plain HTTP or
// one-way TLS. Authorization maps the name to grants exactly as it maps a
// user name; the name is as trustworthy as the CA that signed it.
func PrincipalFromTLS(r *http.Request) (principal string, ok bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return "", false
	}
	cn := r.TLS.VerifiedChains[0][0].Subject.CommonName
	return cn, cn != ""
}
