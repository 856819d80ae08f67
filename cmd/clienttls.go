package cmd

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/charmbracelet/log"
	"github.com/spf13/pflag"

	"github.com/streamcast/streamcast/pkg/wire"
)

// clientTLS is the TLS flags of the commands that connect to a server
// (tail, publish, bench): which CAs to trust for a wss:// URL, a client
// certificate for mutual TLS, or no verification at all.
type clientTLS struct {
	caFile, certFile, keyFile string
	insecure                  bool
}

// addClientTLSFlags declares the flags on f.
func addClientTLSFlags(f *pflag.FlagSet) *clientTLS {
	c := &clientTLS{}
	f.StringVar(&c.caFile, "ca-file", "", "for wss:// URLs, trust the server's certificate when this PEM `FILE`'s CA signed it (beside the system's CAs)")
	f.StringVar(&c.certFile, "cert-file", "", "for wss:// URLs to a server that requires client certificates, present this PEM certificate `FILE`")
	f.StringVar(&c.keyFile, "key-file", "", "the PEM private key `FILE` of --cert-file")
	f.BoolVar(&c.insecure, "insecure", false, "for wss:// URLs, do not verify the server's certificate (anyone on the path can then read and change the rows); prefer --ca-file")
	return c
}

// config returns the TLS configuration the flags ask for, nil when they ask
// for nothing (the system's CAs then). --insecure logs a warning, every
// time: it must never go unnoticed in a script's output.
func (c *clientTLS) config(logger *log.Logger) (*tls.Config, error) {
	if c.caFile == "" && c.certFile == "" && c.keyFile == "" && !c.insecure {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case c.insecure && c.caFile != "":
		return nil, usageError{errors.New("--insecure skips verifying the server's certificate, so --ca-file would be ignored; give one of them")}
	case c.insecure:
		logger.Warn("--insecure: the server's certificate is not verified, so anyone on the network path can read and change this connection; use --ca-file with the server's CA instead")
		tc.InsecureSkipVerify = true
	case c.caFile != "":
		pool, err := wire.RootsWithCAFile(c.caFile)
		if errors.Is(err, wire.ErrNoCertificate) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate; give the certificate of the CA that signed the server's", c.caFile)
		}
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		tc.RootCAs = pool
	}
	if (c.certFile == "") != (c.keyFile == "") {
		return nil, usageError{errors.New("--cert-file and --key-file go together; give both for mutual TLS, or neither")}
	}
	if c.certFile != "" {
		cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file %s and --key-file %s do not load as a certificate and its key: %w", c.certFile, c.keyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
