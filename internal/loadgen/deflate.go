package loadgen

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// deflateSub is a bench subscriber that offers permessage-deflate as a
// browser does (context takeover both ways) and reads frames itself:
// gorilla/websocket, under the Go client, inflates each message on its
// own and so never gets the server's compression with history. Only a
// subscriber that times its rows (one in 25) inflates them; the others
// follow frame headers and count, as a client that parses nothing would,
// so the load generator stays cheaper than the server it measures. It
// meets Recv's needs of the bench and nothing more: a 4429 or any close
// ends it.
type deflateSub struct {
	nc      net.Conn
	br      *bufio.Reader
	inflate bool
	inf     wire.Inflater
	payload []byte
	msg     wire.Message
	next    int64
	greeted bool
	stop    func() bool // ends a blocked read when Recv's context ends
	// Ext is what the server answered to the offer.
	Ext string
}

// errNotTimed is what Recv returns instead of a message for a row a
// counting subscriber does not decode.
var errNotTimed = errors.New("not decoded")

func dialDeflateSub(ctx context.Context, rawURL string, dial wire.DialOptions, inflate bool) (*deflateSub, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"ws": "80", "wss": "443"}[u.Scheme])
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	var nc net.Conn
	if u.Scheme == "wss" {
		cfg := dial.TLS
		if cfg == nil {
			cfg = &tls.Config{}
		}
		cfg = cfg.Clone()
		cfg.ServerName = u.Hostname()
		nc, err = (&tls.Dialer{NetDialer: &d, Config: cfg}).DialContext(ctx, "tcp", host)
	} else {
		nc, err = d.DialContext(ctx, "tcp", host)
	}
	if err != nil {
		return nil, err
	}
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host +
		"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " +
		base64.StdEncoding.EncodeToString(key) +
		"\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
	if c := dial.Credentials; c != nil {
		pw, _ := c.Password()
		req += "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(c.Username()+":"+pw)) + "\r\n"
	}
	if _, err := io.WriteString(nc, req+"\r\n"); err != nil {
		nc.Close()
		return nil, err
	}
	s := &deflateSub{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), inflate: inflate, next: wire.Null}
	resp, err := http.ReadResponse(s.br, nil)
	if err != nil {
		nc.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		nc.Close()
		return nil, fmt.Errorf("%s answered %s", rawURL, resp.Status)
	}
	s.Ext = resp.Header.Get("Sec-WebSocket-Extensions")
	g, err := s.read()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("greeting: %w", err)
	}
	s.greeted = true
	var greet struct {
		EndOffset int64 `json:"end_offset"`
	}
	if err := json.Unmarshal(g, &greet); err == nil && greet.EndOffset > 0 {
		s.next = greet.EndOffset
	}
	return s, nil
}

// read returns the next data message, inflated when compressed, or
// errNotTimed for one a counting subscriber skipped.
func (s *deflateSub) read() ([]byte, error) {
	for {
		var h [10]byte
		if _, err := io.ReadFull(s.br, h[:2]); err != nil {
			return nil, err
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			if _, err := io.ReadFull(s.br, h[2:4]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(h[2:4]))
		case 127:
			if _, err := io.ReadFull(s.br, h[2:10]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(h[2:10])
		}
		op := h[0] & 0x0f
		compressed := h[0]&0x40 != 0
		if op < 0x8 && !s.inflate && s.greeted {
			// A data frame a counting subscriber skips.
			if _, err := s.br.Discard(int(n)); err != nil {
				return nil, err
			}
			return nil, errNotTimed
		}
		if uint64(cap(s.payload)) < n {
			s.payload = make([]byte, n)
		}
		p := s.payload[:n]
		if _, err := io.ReadFull(s.br, p); err != nil {
			return nil, err
		}
		switch op {
		case 0x8:
			return nil, closeError(p)
		case 0x9, 0xA:
			continue // the server's pings: its keepalive counts data drained, too
		}
		if compressed {
			return s.inf.Inflate(p, 0)
		}
		return p, nil
	}
}

func closeError(p []byte) error {
	if len(p) < 2 {
		return io.EOF
	}
	code := int(binary.BigEndian.Uint16(p))
	if code == wire.CloseTooSlow {
		var ts wire.TooSlow
		if json.Unmarshal(p[2:], &ts) == nil {
			return &ts
		}
	}
	return fmt.Errorf("closed %d %s", code, p[2:])
}

// Recv returns the next row; a counting subscriber's rows come back with
// only their offset known (by count) and no Row.
func (s *deflateSub) Recv(ctx context.Context) (*wire.Message, error) {
	if s.stop == nil {
		s.stop = context.AfterFunc(ctx, func() { _ = s.nc.SetReadDeadline(time.Now()) })
	}
	p, err := s.read()
	if errors.Is(err, errNotTimed) {
		s.msg = wire.Message{Offset: s.next, TS: wire.Null}
		if s.next != wire.Null {
			s.next++
		}
		return &s.msg, nil
	}
	if err != nil {
		return nil, err
	}
	if err := parseDataFrame(p, &s.msg); err != nil {
		return nil, err
	}
	if s.msg.Offset != wire.Null {
		s.next = s.msg.Offset + 1
	}
	return &s.msg, nil
}

func (s *deflateSub) Close() error {
	if s.stop != nil {
		s.stop()
	}
	return s.nc.Close()
}

// Resume is the offset of the next row expected.
func (s *deflateSub) Resume() int64 { return s.next }
