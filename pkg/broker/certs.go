package broker

import (
	"crypto/tls"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

// certStore holds the TLS configuration new handshakes get. A handshake reads
// it once (GetConfigForClient), so a reload changes what the next client
// sees and nothing about a connection already open: its keys were agreed
// with the old certificate and stay valid.
type certStore struct {
	logger *log.Logger
	cur    atomic.Pointer[tls.Config]
	// mutual is whether serve started with client_ca_file: fixed until a
	// restart, as the log says of a reload that changes it, so that no
	// reload can turn client-certificate checking off unseen.
	mutual bool

	// mu serialises loads (a SIGHUP and the watcher may both try one) and
	// guards what follows.
	mu    sync.Mutex
	files config.TLS
	// seen is the state of the files when they were last read, loaded or
	// refused: the watcher tries again only once they change.
	seen []fileStamp
}

// fileStamp is what the watcher compares to notice a file changed: a
// rename over it (the usual way to replace a certificate) changes the
// modification time or the size, and so does a write in place.
type fileStamp struct {
	mod  time.Time
	size int64
	err  bool
}

// newCertStore loads the tls: section's files; the server does not start with
// a pair that does not load.
func newCertStore(files config.TLS, logger *log.Logger) (*certStore, error) {
	c := &certStore{logger: logger, mutual: files.ClientCAFile != ""}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.loadLocked(files); err != nil {
		return nil, err
	}
	return c, nil
}

// ListenerConfig is the configuration the listener is built with; each
// handshake takes the loaded one.
func (c *certStore) ListenerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return c.cur.Load(), nil
		},
	}
}

// loadLocked reads files and, when they load, makes them what new
// handshakes get; c.mu is held.
func (c *certStore) loadLocked(files config.TLS) error {
	c.files, c.seen = files, stamps(files)
	cert, pool, err := files.Load()
	if err != nil {
		return err
	}
	tc := &tls.Config{
		MinVersion:   tls.VersionTLS12, // Go's default cipher suites above it
		Certificates: []tls.Certificate{*cert},
		// WebSocket upgrades are HTTP/1.1 requests; offering h2 would
		// let a browser pick a protocol that cannot upgrade.
		NextProtos: []string{"http/1.1"},
	}
	if pool != nil {
		tc.ClientAuth = tls.RequireAndVerifyClientCert
		tc.ClientCAs = pool
	}
	c.cur.Store(tc)
	return nil
}

// Reload reads files again and makes them what new handshakes get; a pair
// that does not load is refused and logged, and the loaded one keeps
// serving. why says what asked for it, for the log. Whether clients must
// present a certificate stays as it was at start: files that add or drop
// client_ca_file keep the running one (or none) until serve restarts.
func (c *certStore) Reload(files config.TLS, why string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mutual != (files.ClientCAFile != "") {
		files.ClientCAFile = c.files.ClientCAFile
	}
	return c.reloadLocked(files, why)
}

func (c *certStore) reloadLocked(files config.TLS, why string) error {
	if err := c.loadLocked(files); err != nil {
		c.logger.Error("TLS certificate refused; new connections still get the one loaded before", "why", why, "err", err)
		return err
	}
	leaf := c.cur.Load().Certificates[0].Leaf
	if leaf != nil {
		c.logger.Info("TLS certificate loaded", "why", why, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	} else {
		c.logger.Info("TLS certificate loaded", "why", why)
	}
	return nil
}

// poll reloads the files when they changed since they were last read,
// once they have stayed the same between two polls: a pair being replaced
// file by file is read once, whole, not once per file. prev is what the
// previous poll saw; poll returns what this one saw.
func (c *certStore) poll(prev []fileStamp) []fileStamp {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := stamps(c.files)
	if slices.Equal(now, c.seen) || !slices.Equal(now, prev) {
		return now
	}
	_ = c.reloadLocked(c.files, "the files changed on disk")
	return now
}

// Watch polls the files every interval until stop is closed.
func (c *certStore) Watch(stop <-chan struct{}, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var prev []fileStamp
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			prev = c.poll(prev)
		}
	}
}

func stamps(files config.TLS) []fileStamp {
	var out []fileStamp
	for _, p := range []string{files.CertFile, files.KeyFile, files.ClientCAFile} {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			out = append(out, fileStamp{err: true})
			continue
		}
		out = append(out, fileStamp{mod: fi.ModTime(), size: fi.Size()})
	}
	return out
}
