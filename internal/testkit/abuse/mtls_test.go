package abuse

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
)

// TestAReloadThatDropsClientCAFileKeepsMutualTLS starts serve with mutual
// TLS, removes client_ca_file from its config and sends SIGHUP. The log
// says the change waits for a restart, and so it does: a client without a
// certificate is still refused, and one with a certificate the CA signed
// is still served, rather than the reload turning client-certificate
// checking off at once while the log says it waits.
func TestAReloadThatDropsClientCAFileKeepsMutualTLS(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	dir := t.TempDir()
	if err := testkit.WriteTLSFiles(dir, "client-one"); err != nil {
		t.Fatal(err)
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	tlsYAML := func(mutual bool) string {
		y := fmt.Sprintf("tls:\n  cert_file: %s\n  key_file: %s\n", f("server.crt"), f("server.key"))
		if mutual {
			y += fmt.Sprintf("  client_ca_file: %s\n", f("ca.crt"))
		}
		return y
	}
	s := start(t, options{extra: tlsYAML(true)})

	caPEM, err := os.ReadFile(f("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	client, err := tls.LoadX509KeyPair(f("client.crt"), f("client.key"))
	if err != nil {
		t.Fatal(err)
	}
	// health answers GET /health over TLS, with or without the client's
	// certificate, and returns the status or the error.
	health := func(withCert bool) (int, error) {
		conf := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
		if withCert {
			conf.Certificates = []tls.Certificate{client}
		}
		c, err := tls.Dial("tcp", s.addr, conf)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")); err != nil {
			return 0, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	check := func(when string) {
		t.Helper()
		if code, err := health(false); err == nil {
			t.Errorf("%s: a client without a certificate got HTTP %d; want the handshake refused", when, code)
		}
		if code, err := health(true); err != nil || code != http.StatusOK {
			t.Errorf("%s: a client with the CA's certificate: HTTP %d, %v; want 200", when, code, err)
		}
	}
	check("at start")

	cfg, err := os.ReadFile(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	without := strings.Replace(string(cfg), tlsYAML(true), tlsYAML(false), 1)
	if without == string(cfg) {
		t.Fatalf("the config holds no tls: section to change:\n%s", cfg)
	}
	if err := os.WriteFile(s.cfg, []byte(without), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(s.pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(s.logs.String(), "tls changed in the config; it applies when serve restarts"),
			"serve has not logged that the tls: change waits for a restart:\n" + s.logs.String()
	})
	waitUntil(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(s.logs.String(), `TLS certificate loaded why=reload`), "serve has not reloaded its certificate:\n" + s.logs.String()
	})
	check("after the reload that dropped client_ca_file")
}
