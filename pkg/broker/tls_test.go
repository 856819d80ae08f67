package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// tlsFixture is a CA, the server's certificate files it signed, and a
// config serving them.
type tlsFixture struct {
	ca       *testkit.CA
	dir      string
	certFile string
	keyFile  string
	serial   *big.Int // of the server certificate written last
	cfg      config.Config
}

func newTLSFixture(t *testing.T) *tlsFixture {
	t.Helper()
	ca, err := testkit.NewCA("streamcast test CA")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &tlsFixture{ca: ca, dir: dir, certFile: filepath.Join(dir, "server.crt"), keyFile: filepath.Join(dir, "server.key")}
	f.rotate(t)
	f.cfg = testConfig(t)
	f.cfg.TLS = config.TLS{CertFile: f.certFile, KeyFile: f.keyFile}
	return f
}

// rotate writes a new server certificate (a new serial) and key over the
// files.
func (f *tlsFixture) rotate(t *testing.T) {
	t.Helper()
	p, err := f.ca.Server("streamcast test server")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f.certFile, f.keyFile); err != nil {
		t.Fatal(err)
	}
	f.serial = p.Leaf.SerialNumber
}

// client is a client configuration trusting the fixture's CA.
func (f *tlsFixture) client() *tls.Config {
	return &tls.Config{RootCAs: f.ca.Pool(), MinVersion: tls.VersionTLS12}
}

// servedSerial opens a new TLS connection to srv and returns the serial of
// the certificate the handshake got.
func servedSerial(t *testing.T, srv *Server, tc *tls.Config) *big.Int {
	t.Helper()
	conn, err := tls.Dial("tcp", srv.Addr().String(), tc)
	if err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

func wssURL(srv *Server, path string) string { return "wss://" + srv.Addr().String() + path }

// TestTLSServesWSSEndToEnd: with tls:, rows published over wss reach a wss
// subscriber, byte for byte as over ws, and /health answers over https;
// plain ws and http get nothing but a refusal.
func TestTLSServesWSSEndToEnd(t *testing.T) {
	f := newTLSFixture(t)
	var sawTLS, sawPrincipal sync.Map
	srv := startServer(t, f.cfg, Options{Middleware: []Middleware{func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sawTLS.Store(r.URL.Path, r.TLS != nil)
			if p, ok := PrincipalFromTLS(r); ok {
				sawPrincipal.Store(r.URL.Path, p)
			}
			next.ServeHTTP(w, r)
		})
	}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := wire.DialOptions{TLS: f.client()}

	sub, err := wire.Subscribe(ctx, wssURL(srv, "/trades"), wire.SubscribeOptions{DialOptions: dial})
	if err != nil {
		t.Fatalf("subscribe over wss: %v", err)
	}
	defer sub.Close()
	pub, err := wire.Publish(ctx, wssURL(srv, "/trades"), wire.PublishOptions{DialOptions: dial})
	if err != nil {
		t.Fatalf("publish over wss: %v", err)
	}
	// Enough rows, in batches, that the writer hands TLS many frames at
	// once (the coalesced path), beyond one 64 KiB buffer.
	const batches, per = 40, 100
	for i := range batches {
		rows := make([][]byte, per)
		for k := range rows {
			rows[k] = []byte(trade(i*per + k))
		}
		if _, err := pub.SendBatch(ctx, rows); err != nil {
			t.Fatalf("send batch %d: %v", i, err)
		}
	}
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	for want := int64(1); want <= batches*per; want++ {
		m, err := sub.Recv(ctx)
		if err != nil {
			t.Fatalf("receive offset %d over wss: %v", want, err)
		}
		if m.Offset != want {
			t.Fatalf("received offset %d, want %d", m.Offset, want)
		}
	}
	// Replayed over TLS (writeDirect) the rows are the live ones, in order.
	re, err := wire.Subscribe(ctx, wssURL(srv, "/trades"), wire.SubscribeOptions{DialOptions: dial, Offset: wire.At(1)})
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	for want := int64(1); want <= batches*per; want++ {
		m, err := re.Recv(ctx)
		if err != nil || m.Offset != want {
			t.Fatalf("replay: offset %v err %v, want %d", m, err, want)
		}
	}
	if v, _ := sawTLS.Load("/trades"); v != true {
		t.Errorf("the request for /trades did not arrive over TLS (r.TLS nil)")
	}
	if p, ok := sawPrincipal.Load("/trades"); ok {
		t.Errorf("PrincipalFromTLS named %q without mutual TLS", p)
	}

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: f.client()}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://" + srv.Addr().String() + "/health")
	if err != nil {
		t.Fatalf("GET https /health: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 1 {
		t.Fatalf("GET https /health: %s %s, want 200 over HTTP/1.1", resp.Proto, resp.Status)
	}

	// Plain HTTP and ws are not served.
	resp, err = http.Get("http://" + srv.Addr().String() + "/health")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("GET http /health on a TLS server answered 200: %s", body)
		}
	}
	_, err = wire.Subscribe(ctx, wsURL(srv, "/trades"), wire.SubscribeOptions{})
	if err == nil || !strings.Contains(err.Error(), "wss://") {
		t.Fatalf("ws:// to a TLS server: got %v, want an error saying to use wss://", err)
	}
	// A client that does not trust the CA is told how to.
	_, err = wire.Subscribe(ctx, wssURL(srv, "/trades"), wire.SubscribeOptions{})
	if err == nil || !strings.Contains(err.Error(), "--ca-file") {
		t.Fatalf("wss:// without the CA: got %v, want an error naming --ca-file", err)
	}
}

// TestTLSRefusesVersionsBelow12: a client that offers at most TLS 1.1 is
// refused in the handshake; TLS 1.2 and 1.3 are served.
func TestTLSRefusesVersionsBelow12(t *testing.T) {
	f := newTLSFixture(t)
	srv := startServer(t, f.cfg)
	for _, v := range []struct {
		max uint16
		ok  bool
	}{{tls.VersionTLS10, false}, {tls.VersionTLS11, false}, {tls.VersionTLS12, true}, {tls.VersionTLS13, true}} {
		tc := f.client()
		tc.MinVersion, tc.MaxVersion = tls.VersionTLS10, v.max
		conn, err := tls.Dial("tcp", srv.Addr().String(), tc)
		if err == nil {
			conn.Close()
		}
		if (err == nil) != v.ok {
			t.Errorf("client at most %s: handshake err %v, want ok=%v", tls.VersionName(v.max), err, v.ok)
		}
	}
}

// TestTLSCertificateRotationKeepsSubscribers: with 50 wss subscribers
// connected, the certificate is replaced on disk; new handshakes get the
// new one, and every subscriber stays connected and receives the rows
// published after. A reload (SIGHUP) then picks up the next one at once.
func TestTLSCertificateRotationKeepsSubscribers(t *testing.T) {
	f := newTLSFixture(t)
	logs := &testkit.SyncBuffer{}
	srv := startServer(t, f.cfg, Options{Logger: log.New(logs), CertPollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := wire.DialOptions{TLS: f.client()}

	const subscribers = 50
	subs := make([]*wire.Subscription, subscribers)
	for i := range subs {
		s, err := wire.Subscribe(ctx, wssURL(srv, "/trades"), wire.SubscribeOptions{DialOptions: dial})
		if err != nil {
			t.Fatalf("subscriber %d: %v", i, err)
		}
		defer s.Close()
		subs[i] = s
	}
	first := f.serial
	if got := servedSerial(t, srv, f.client()); got.Cmp(first) != 0 {
		t.Fatalf("served serial %v, want %v", got, first)
	}

	publishAndReceive := func(from, n int) {
		t.Helper()
		pub, err := wire.Publish(ctx, wssURL(srv, "/trades"), wire.PublishOptions{DialOptions: dial})
		if err != nil {
			t.Fatal(err)
		}
		rows := make([][]byte, n)
		for k := range rows {
			rows[k] = []byte(trade(from + k))
		}
		offs, err := pub.SendBatch(ctx, rows)
		if err != nil {
			t.Fatal(err)
		}
		_ = pub.Close()
		for i, s := range subs {
			for _, want := range offs {
				m, err := s.Recv(ctx)
				if err != nil {
					t.Fatalf("subscriber %d was dropped by the rotation: %v", i, err)
				}
				if m.Offset != want {
					t.Fatalf("subscriber %d: offset %d, want %d", i, m.Offset, want)
				}
			}
		}
	}
	publishAndReceive(0, 5)

	// 1. On disk: the watcher loads the new pair for new handshakes.
	f.rotate(t)
	second := f.serial
	waitFor(t, "new handshakes to get the rotated certificate", 20*time.Second, func() bool {
		return servedSerial(t, srv, f.client()).Cmp(second) == 0
	})
	publishAndReceive(5, 5)
	if n := streamStats(srv, "trades").Subscribers; n != subscribers {
		t.Fatalf("after the rotation the stream has %d subscribers, want %d", n, subscribers)
	}

	// 2. Reload (SIGHUP): the next pair at once, before the watcher's
	// next poll.
	f.rotate(t)
	third := f.serial
	if err := srv.Reload(f.cfg); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := servedSerial(t, srv, f.client()); got.Cmp(third) != 0 {
		t.Fatalf("after reload new handshakes get serial %v, want %v", got, third)
	}
	publishAndReceive(10, 5)
	if !strings.Contains(logs.String(), "TLS certificate loaded") {
		t.Errorf("no reload was logged:\n%s", logs.String())
	}
}

// TestTLSReloadNowServesTheNewCertificate: Reload makes new handshakes get
// the pair on disk at once, without waiting for the watcher.
func TestTLSReloadNowServesTheNewCertificate(t *testing.T) {
	f := newTLSFixture(t)
	srv := startServer(t, f.cfg, Options{CertPollInterval: time.Hour})
	f.rotate(t)
	if err := srv.Reload(f.cfg); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := servedSerial(t, srv, f.client()); got.Cmp(f.serial) != 0 {
		t.Fatalf("after Reload new handshakes get serial %v, want the new %v", got, f.serial)
	}
}

// TestTLSBadPairIsRefusedAndOldKept: a certificate written over the file
// without its key (a half-done rotation) is refused and logged; new
// handshakes keep getting the pair loaded before, and a Reload with it
// changes nothing. Once the key follows, the new pair is served.
func TestTLSBadPairIsRefusedAndOldKept(t *testing.T) {
	f := newTLSFixture(t)
	logs := &testkit.SyncBuffer{}
	srv := startServer(t, f.cfg, Options{Logger: log.New(logs), CertPollInterval: 20 * time.Millisecond})
	old := f.serial

	next, err := f.ca.Server("streamcast test server")
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Write(f.certFile, f.keyFile+".next"); err != nil { // the key lags
		t.Fatal(err)
	}
	waitFor(t, "the refusal to be logged", 20*time.Second, func() bool {
		return strings.Contains(logs.String(), "TLS certificate refused")
	})
	if got := servedSerial(t, srv, f.client()); got.Cmp(old) != 0 {
		t.Fatalf("after a bad pair new handshakes get serial %v, want the old %v", got, old)
	}
	if err := srv.Reload(f.cfg); err == nil {
		t.Fatal("Reload with a certificate and a key that do not match succeeded")
	}
	if got := servedSerial(t, srv, f.client()); got.Cmp(old) != 0 {
		t.Fatalf("after a refused reload new handshakes get serial %v, want the old %v", got, old)
	}

	if err := next.Write(f.certFile, f.keyFile); err != nil { // the key arrives
		t.Fatal(err)
	}
	waitFor(t, "the completed pair to be served", 20*time.Second, func() bool {
		return servedSerial(t, srv, f.client()).Cmp(next.Leaf.SerialNumber) == 0
	})
}

// TestMutualTLS: with client_ca_file, a client presenting a certificate the
// CA signed is served and its common name is the request's principal; a
// client without one, or with one another CA signed, is refused in the
// handshake, before any stream is looked up.
func TestMutualTLS(t *testing.T) {
	f := newTLSFixture(t)
	caFile := filepath.Join(f.dir, "ca.crt")
	if err := f.ca.WriteCert(caFile); err != nil {
		t.Fatal(err)
	}
	f.cfg.TLS.ClientCAFile = caFile
	principals := make(chan string, 4)
	srv := startServer(t, f.cfg, Options{Middleware: []Middleware{func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, ok := PrincipalFromTLS(r)
			if !ok {
				p = "<none>"
			}
			principals <- p
			next.ServeHTTP(w, r)
		})
	}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	alice, err := f.ca.Client("alice")
	if err != nil {
		t.Fatal(err)
	}
	withCert := f.client()
	withCert.Certificates = []tls.Certificate{alice.TLS()}
	sub, err := wire.Subscribe(ctx, wssURL(srv, "/trades"), wire.SubscribeOptions{DialOptions: wire.DialOptions{TLS: withCert}})
	if err != nil {
		t.Fatalf("subscribe with a client certificate: %v", err)
	}
	sub.Close()
	if p := <-principals; p != "alice" {
		t.Fatalf("principal %q, want alice (the client certificate's CN)", p)
	}

	other, err := testkit.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	mallory, err := other.Client("alice")
	if err != nil {
		t.Fatal(err)
	}
	foreign := f.client()
	foreign.Certificates = []tls.Certificate{mallory.TLS()}
	for name, tc := range map[string]*tls.Config{"without a client certificate": f.client(), "with another CA's certificate": foreign} {
		_, err := wire.Subscribe(ctx, wssURL(srv, "/trades"), wire.SubscribeOptions{DialOptions: wire.DialOptions{TLS: tc}})
		if err == nil {
			t.Fatalf("%s: subscribed, want a refusal in the handshake", name)
		}
		if !strings.Contains(err.Error(), "client certificate") {
			t.Errorf("%s: error %q does not say a client certificate is needed", name, err)
		}
	}
	select {
	case p := <-principals:
		t.Fatalf("a request without a valid client certificate reached the routes (principal %q)", p)
	default:
	}
}

// BenchmarkWriteBatchTLS measures the frame writer's two ways of handing a
// batch of small frames to a TLS connection: net.Buffers (a record and a
// syscall per frame, as a writev-less connection gets) against the copy
// into one buffer writeBatch makes.
func BenchmarkWriteBatchTLS(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		for _, mode := range []string{"buffers", "coalesced"} {
			b.Run(fmt.Sprintf("%s/frames=%d", mode, n), func(b *testing.B) {
				client, server := tlsPipe(b)
				go func() { _, _ = io.Copy(io.Discard, client) }()
				frames := make([][]byte, n)
				for i := range frames {
					frames[i] = []byte(`[123456,1700000000000000,{"event_ts":1700000000000000,"symbol":"S1","price":1.5,"amount":1.0,"side":1}]`)
				}
				b.SetBytes(int64(n * len(frames[0])))
				scratch := make([][]byte, n)
				b.ResetTimer()
				for range b.N {
					var err error
					if mode == "buffers" {
						copy(scratch, frames) // WriteTo empties the slice it writes
						bufs := net.Buffers(scratch)
						_, err = bufs.WriteTo(server)
					} else {
						_, err = wire.WriteCoalesced(server, frames)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "frames/s")
			})
		}
	}
}

// tlsPipe returns the two ends of a TLS connection over TCP on 127.0.0.1,
// closed when b ends.
func tlsPipe(b *testing.B) (client, server *tls.Conn) {
	b.Helper()
	ca, err := testkit.NewCA("bench CA")
	if err != nil {
		b.Fatal(err)
	}
	pair, err := ca.Server("bench server")
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *tls.Conn, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		c := tls.Server(raw, &tls.Config{Certificates: []tls.Certificate{pair.TLS()}})
		if c.Handshake() != nil {
			c.Close()
			c = nil
		}
		accepted <- c
	}()
	client, err = tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool()})
	if err != nil {
		b.Fatal(err)
	}
	if server = <-accepted; server == nil {
		b.Fatal("the server side of the TLS pipe failed its handshake")
	}
	b.Cleanup(func() {
		server.Close()
		client.Close()
	})
	return client, server
}

// TestTLSTurnedOffByReloadAppliesAtRestart: whether serve speaks TLS is
// fixed at start; a reload that drops the tls: section says so and the
// server keeps serving wss.
func TestTLSTurnedOffByReloadAppliesAtRestart(t *testing.T) {
	f := newTLSFixture(t)
	logs := &testkit.SyncBuffer{}
	srv := startServer(t, f.cfg, Options{Logger: log.New(logs)})
	plain := f.cfg
	plain.TLS = config.TLS{}
	if err := srv.Reload(plain); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if !strings.Contains(logs.String(), "tls changed in the config; it applies when serve restarts") {
		t.Fatalf("the change of tls: was not logged as applying at restart:\n%s", logs.String())
	}
	if got := servedSerial(t, srv, f.client()); got.Cmp(f.serial) != 0 {
		t.Fatalf("after the reload handshakes get serial %v, want %v", got, f.serial)
	}
}
