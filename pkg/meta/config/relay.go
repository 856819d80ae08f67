package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/streamcast/streamcast/pkg/wire"
)

// IsRelay reports whether the stream mirrors an upstream stream rather than
// taking publishers of its own.
func (s *Stream) IsRelay() bool { return s.Upstream != "" }

// validateUpstream checks a relay's upstream: and the keys that cannot go
// with it. A relay's rows, schema and identity are its upstream's, so
// everything that would make it a writer of its own is refused.
func (s *Stream) validateUpstream(key, label string) error {
	if s.Upstream == "" {
		if s.UpstreamCAFile != "" {
			return keyErrorf(key+".upstream_ca_file", "%s has upstream_ca_file: but no upstream:; it is the CA a relay trusts for its wss:// upstream, so drop it or add upstream:", label)
		}
		return nil
	}
	ukey := key + ".upstream"
	if s.Upstream == Redacted {
		return keyErrorf(ukey, "%s: upstream is %q, which is how streamcast config prints it; give the URL itself (credentials may go in STREAMCAST_USER and STREAMCAST_PASSWORD instead)", label, Redacted)
	}
	clean, _, err := wire.SplitCredentials(s.Upstream)
	if err != nil {
		return keyErrorf(ukey, "%s: upstream: %v", label, err)
	}
	u, err := url.Parse(clean)
	switch {
	case err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "":
		return keyErrorf(ukey, "%s: upstream is not a stream URL; give one such as ws://origin:8765/trades (or wss:// with TLS)", label)
	case u.RawQuery != "" || u.Fragment != "":
		return keyErrorf(ukey, "%s: upstream %s has a query; a relay chooses its own offset, so give the stream's URL alone (%s://%s%s)", label, clean, u.Scheme, u.Host, u.Path)
	case strings.Contains(strings.TrimPrefix(u.Path, "/"), "/"):
		return keyErrorf(ukey, "%s: upstream %s has a path of more than one segment; give the server's address and the stream's name, as in ws://origin:8765/trades", label, clean)
	}
	if s.UpstreamCAFile != "" {
		if u.Scheme != "wss" {
			return keyErrorf(key+".upstream_ca_file", "%s: upstream_ca_file: is for a wss:// upstream, and %s is not one; drop it, or use wss://", label, clean)
		}
		if _, err := s.UpstreamTLS(); err != nil {
			return keyError(key+".upstream_ca_file", fmt.Errorf("%s: %w", label, err))
		}
	}
	for _, k := range []struct {
		set  bool
		name string
		why  string
	}{
		{len(s.Schema) > 0 || s.SchemaFile != "", "schema", "a relay serves its upstream's schema, from the upstream's greeting"},
		{len(s.SortBy) > 0, "sort_by", "a relay's columns are its upstream's, known only once it connects"},
		{s.ExactlyOnce, "exactly_once", "a relay takes no publishers"},
		{s.Replicate, "replicate", "a relay's log is a cache of its upstream; the upstream's log is the one to replicate"},
		{s.HistoryGuard != nil, "history_guard", "guard the history on the origin, whose log it is"},
	} {
		if k.set {
			return keyErrorf(key+"."+k.name, "%s has upstream: and %s: %s, so drop %s", label, k.name, k.why, k.name)
		}
	}
	return nil
}

// UpstreamURL returns the relay's upstream URL without its credentials (what
// may be printed, logged and sent in a close reason) and the credentials
// its user info held (nil when none).
func (s *Stream) UpstreamURL() (string, *url.Userinfo, error) {
	return wire.SplitCredentials(s.Upstream)
}

// UpstreamTLS returns the TLS configuration a relay dials its wss://
// upstream with: the system's CAs and, with upstream_ca_file:, the CAs in
// that file too (as tail's --ca-file). nil when no file is set (the
// system's CAs alone).
func (s *Stream) UpstreamTLS() (*tls.Config, error) {
	if s.UpstreamCAFile == "" {
		return nil, nil
	}
	pool, err := wire.RootsWithCAFile(s.UpstreamCAFile)
	if errors.Is(err, wire.ErrNoCertificate) {
		return nil, fmt.Errorf("upstream_ca_file %s holds no PEM certificate; give the certificate of the CA that signed the upstream's certificate", s.UpstreamCAFile)
	}
	if err != nil {
		return nil, fmt.Errorf("upstream_ca_file: %w; give the PEM certificate of the CA that signed the upstream's certificate", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, nil
}
