package wire

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// TestDialOptionsTLSReachesTheDialer: DialOptions.TLS configures the
// default dialer, and a caller's Dialer without a TLS configuration of its
// own (left unchanged); a Dialer's own TLS configuration wins.
func TestDialOptionsTLSReachesTheDialer(t *testing.T) {
	tc := &tls.Config{ServerName: "broker.example"}
	if d := (&DialOptions{TLS: tc}).dialer(nil); d.TLSClientConfig != tc {
		t.Fatalf("default dialer: TLSClientConfig %v, want DialOptions.TLS", d.TLSClientConfig)
	}
	mine := &websocket.Dialer{ReadBufferSize: 123}
	d := (&DialOptions{TLS: tc, Dialer: mine}).dialer(nil)
	if d.TLSClientConfig != tc || d.ReadBufferSize != 123 {
		t.Fatalf("caller's dialer: TLSClientConfig %v, ReadBufferSize %d; want DialOptions.TLS and the caller's 123", d.TLSClientConfig, d.ReadBufferSize)
	}
	if mine.TLSClientConfig != nil {
		t.Fatal("the caller's Dialer was changed")
	}
	own := &tls.Config{ServerName: "own"}
	if d := (&DialOptions{TLS: tc, Dialer: &websocket.Dialer{TLSClientConfig: own}}).dialer(nil); d.TLSClientConfig != own {
		t.Fatal("a Dialer's own TLS configuration was replaced")
	}
}

// TestTLSHintNamesTheWayOut: each TLS failure a user can fix from the
// client's side is returned wrapped with what to do; others unchanged.
func TestTLSHintNamesTheWayOut(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("tls: failed to verify certificate: %w", x509.UnknownAuthorityError{}), "--ca-file"},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, "use ws://"},
		{errors.New("remote error: tls: certificate required"), "requires a client certificate"},
		{errors.New("remote error: tls: bad certificate"), "requires a client certificate"},
	} {
		got := tlsHint(tc.err)
		if !strings.Contains(got.Error(), tc.want) || !errors.Is(got, tc.err) {
			t.Errorf("tlsHint(%v) = %v, want it to wrap the error and say %q", tc.err, got, tc.want)
		}
	}
	other := errors.New("connection refused")
	if got := tlsHint(other); got != other {
		t.Errorf("tlsHint changed an unrelated error: %v", got)
	}
}

// TestCompressionIsOfferedWhereTheBytesCost: the default offers
// permessage-deflate to a server on another host and not over loopback,
// where it would only cost the server CPU; on and off override it.
func TestCompressionIsOfferedWhereTheBytesCost(t *testing.T) {
	for _, tc := range []struct {
		c    Compression
		url  string
		want bool
	}{
		{CompressAuto, "ws://broker.example.com:8765/demo", true},
		{CompressAuto, "wss://10.0.0.7:8765/demo", true},
		{CompressAuto, "ws://[2001:db8::1]:8765/demo", true},
		{CompressAuto, "ws://127.0.0.1:8765/demo", false},
		{CompressAuto, "ws://127.3.4.5:8765/demo", false},
		{CompressAuto, "ws://localhost:8765/demo", false},
		{CompressAuto, "ws://[::1]:8765/demo", false},
		{CompressOn, "ws://127.0.0.1:8765/demo", true},
		{CompressOff, "ws://broker.example.com:8765/demo", false},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := (&DialOptions{Compression: tc.c}).dialer(u).EnableCompression; got != tc.want {
			t.Errorf("compression %s to %s: offered %v, want %v", tc.c, tc.url, got, tc.want)
		}
	}
	for _, s := range []string{"auto", "on", "off"} {
		c, err := ParseCompression(s)
		if err != nil || c.String() != s {
			t.Errorf("ParseCompression(%q) = %v, %v; want it back", s, c, err)
		}
	}
	if _, err := ParseCompression("yes"); err == nil {
		t.Error(`ParseCompression("yes") took it`)
	}
}
