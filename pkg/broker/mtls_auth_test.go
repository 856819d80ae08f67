package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// TestMutualTLSCertificateNameIsThePrincipal: under mutual TLS a client
// that sends no credentials is the CN of its certificate, and the grants
// decide what that name may do, before the upgrade.
func TestMutualTLSCertificateNameIsThePrincipal(t *testing.T) {
	f := newTLSFixture(t)
	caFile := filepath.Join(f.dir, "ca.crt")
	if err := f.ca.WriteCert(caFile); err != nil {
		t.Fatal(err)
	}
	f.cfg.TLS.ClientCAFile = caFile
	f.cfg.Auth = &config.Auth{Grants: []config.Grant{{Principals: []string{"alice"}, Actions: []string{"read"}, Streams: []string{"trades"}}}}
	srv := startServer(t, f.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func(cn string) error {
		pair, err := f.ca.Client(cn)
		if err != nil {
			t.Fatal(err)
		}
		tc := f.client()
		tc.Certificates = []tls.Certificate{pair.TLS()}
		sub, err := wire.Subscribe(ctx, wssURL(srv, "/trades"), wire.SubscribeOptions{DialOptions: wire.DialOptions{TLS: tc}})
		if err == nil {
			sub.Close()
		}
		return err
	}
	if err := dial("alice"); err != nil {
		t.Fatalf("alice's certificate, granted read on trades: %v", err)
	}
	err := dial("bob")
	var denied *wire.AccessDenied
	if !errors.As(err, &denied) || denied.Status != 403 {
		t.Fatalf("bob's certificate, with no grant: got %v, want a 403 before the upgrade", err)
	}
}
