package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/internal/testkit"
)

// writeTLSFiles writes a CA, a server pair and a second key that is not the
// server certificate's into dir.
func writeTLSFiles(t *testing.T, dir string) {
	t.Helper()
	if err := testkit.WriteTLSFiles(dir, "client"); err != nil {
		t.Fatal(err)
	}
}

// TestTLSSectionPathsAreRelativeToTheConfigFile: like schema_file, a
// relative tls: path in the file names a file beside the config file,
// whatever the working directory.
func TestTLSSectionPathsAreRelativeToTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	writeTLSFiles(t, dir)
	data := "streams: [{name: t, durable: false}]\ntls: {cert_file: server.crt, key_file: server.key, client_ca_file: ca.crt}\n"
	cfg, err := Load(Default(), filepath.Join(dir, "streamcast.yaml"), []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "server.crt"); cfg.TLS.CertFile != want {
		t.Fatalf("cert_file %q, want %q", cfg.TLS.CertFile, want)
	}
	if want := filepath.Join(dir, "ca.crt"); cfg.TLS.ClientCAFile != want {
		t.Fatalf("client_ca_file %q, want %q", cfg.TLS.ClientCAFile, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if !cfg.TLS.Enabled() || !cfg.TLS.Mutual() {
		t.Fatalf("Enabled %v Mutual %v, want both", cfg.TLS.Enabled(), cfg.TLS.Mutual())
	}
}

// TestTLSSectionRefusals: each way the section can be wrong is refused by
// Validate with the key, where it came from and the way out.
func TestTLSSectionRefusals(t *testing.T) {
	dir := t.TempDir()
	writeTLSFiles(t, dir)
	other := t.TempDir()
	writeTLSFiles(t, other) // other.key is not server.crt's key
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, tc := range []struct {
		name, tls, key, want string
	}{
		{"cert without key", "{cert_file: " + p("server.crt") + "}", "tls.cert_file", "give both"},
		{"key without cert", "{key_file: " + p("server.key") + "}", "tls.key_file", "give both"},
		{"client CA alone", "{client_ca_file: " + p("ca.crt") + "}", "tls.client_ca_file", "mutual TLS needs the server's own certificate"},
		{"key of another certificate", "{cert_file: " + p("server.crt") + ", key_file: " + filepath.Join(other, "server.key") + "}", "tls.cert_file", "do not load as a certificate and its key"},
		{"missing cert file", "{cert_file: " + p("nope.crt") + ", key_file: " + p("server.key") + "}", "tls.cert_file", "no such file"},
		{"client CA not PEM", "{cert_file: " + p("server.crt") + ", key_file: " + p("server.key") + ", client_ca_file: " + junk + "}", "tls.client_ca_file", "holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := "streams: [{name: t, durable: false}]\ntls: " + tc.tls + "\n"
			cfg, err := Load(Default(), filepath.Join(dir, "streamcast.yaml"), []byte(data))
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Validate()
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Validate: %v, want a *config.Error", err)
			}
			if ce.Key != tc.key || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "streamcast.yaml") {
				t.Fatalf("Validate: key %q, %v; want key %q, a message containing %q and the file", ce.Key, err, tc.key, tc.want)
			}
		})
	}
}

// TestTLSSectionFromTheEnvironment: tls: keys take STREAMCAST_TLS_* like
// every other key.
func TestTLSSectionFromTheEnvironment(t *testing.T) {
	keys := strings.Join(OverrideKeys(), " ")
	for _, k := range []string{"tls.cert_file", "tls.key_file", "tls.client_ca_file"} {
		if !strings.Contains(keys, k) {
			t.Errorf("OverrideKeys lacks %s: %s", k, keys)
		}
	}
}
