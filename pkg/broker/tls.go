package broker

import (
	"net/http"
	"time"
)

// This file is the server's TLS (the tls: section) as the broker sees it:
// certStore (certs.go) holds the certificate every new handshake gets, and
// the entry check (gate.go) reads the principal a client certificate names.

// DefaultCertPollInterval is how often the tls: files are checked for a
// change on disk when Options.CertPollInterval is 0.
const DefaultCertPollInterval = 2 * time.Second

// PrincipalFromTLS returns the principal a request's client certificate
// names under mutual TLS (see principalFromTLS).
func PrincipalFromTLS(r *http.Request) (principal string, ok bool) { return principalFromTLS(r) }
