package wire

import (
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	neturl "net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// serverStream builds the bytes a server compressing with context takeover
// sends (in) and the bytes gorilla must read from an inflateConn over them
// (want): plain messages (some fragmented) as they are, compressed messages
// (some fragmented, with pings between their fragments, the compressor
// reset now and then) as one plain frame each, where their last frame
// ended. big adds messages with 16- and 64-bit lengths.
func serverStream(seed int64, n int, big bool) (in, want []byte) {
	r := rand.New(rand.NewSource(seed))
	rows := tradeFrames(n)
	d := NewDeflater()
	ping := ControlFrame(OpPing, []byte("p"))
	for i := range n {
		_, payload := payloadOf(rows[i])
		if big && i%17 == 5 {
			payload = bytes.Repeat(payload, 1+r.Intn(800)) // up to about 100 KiB
		}
		if i%23 == 0 {
			d.Reset()
		}
		switch k := r.Intn(6); {
		case k == 0: // plain, whole
			f := TextFrame(payload)
			in, want = append(in, f...), append(want, f...)
		case k == 1: // plain, fragmented: passes as it came
			parts := fragment(r, payload)
			for j, p := range parts {
				in = appendFrag(in, j, len(parts), opText, 0, p)
			}
			for j, p := range parts {
				want = appendFrag(want, j, len(parts), opText, 0, p)
			}
		default: // compressed, whole or fragmented, a ping between fragments
			_, z := payloadOf(d.AppendFrame(nil, TextFrame(payload)))
			parts := [][]byte{z}
			if k >= 4 {
				parts = fragment(r, z)
			}
			for j, p := range parts {
				in = appendFrag(in, j, len(parts), opText, rsv1Bit, p)
				if j < len(parts)-1 && r.Intn(2) == 0 {
					in, want = append(in, ping...), append(want, ping...)
				}
			}
			want = appendHeader(want, opText, len(payload))
			want = append(want, payload...)
		}
	}
	in = append(in, ControlFrame(opClose, []byte{0x03, 0xe8})...)
	want = append(want, ControlFrame(opClose, []byte{0x03, 0xe8})...)
	return in, want
}

// fragment splits p into 1 to 4 parts, some maybe empty.
func fragment(r *rand.Rand, p []byte) [][]byte {
	var parts [][]byte
	for k := r.Intn(4); k > 0 && len(p) > 0; k-- {
		i := r.Intn(len(p) + 1)
		parts = append(parts, p[:i])
		p = p[i:]
	}
	return append(parts, p)
}

// appendFrag appends fragment j of n of a message: the first carries op
// and rsv, the others are continuations, the last has FIN.
func appendFrag(dst []byte, j, n int, op, rsv byte, p []byte) []byte {
	b0 := byte(0)
	if j == 0 {
		b0 = op | rsv
	}
	if j == n-1 {
		b0 |= finBit
	}
	dst = appendHeader(dst, 0, len(p))
	dst[len(dst)-headerLen(len(p))] = b0
	return append(dst, p...)
}

// readThrough reads in through an inflateConn reading frames, readSize
// bytes at a time, from a connection whose reads return in in pieces of
// the given sizes (the rest as one last piece), as a socket's reads may.
// It returns what gorilla would have read and the error that ended it
// (io.EOF when the bytes ran out).
func readThrough(t testing.TB, in []byte, writes []int, readSize, limit int) ([]byte, error) {
	src := &piecesConn{}
	rest := in
	for _, n := range writes {
		n = min(n, len(rest))
		src.pieces = append(src.pieces, rest[:n])
		rest = rest[n:]
	}
	src.pieces = append(src.pieces, rest)
	c := newInflateConn(src, int64(limit))
	c.mode = readFrames
	var out []byte
	p := make([]byte, readSize)
	for {
		n, err := c.Read(p)
		out = append(out, p[:n]...)
		if err != nil {
			return out, err
		}
		if n == 0 {
			t.Fatal("Read returned 0 bytes and no error")
		}
	}
}

// piecesConn is the reading end of a connection: each Read returns at most
// what is left of the next piece, then io.EOF. A socket may split a
// stream anywhere; this one splits it where a test says, the same way each
// run, which a fuzz target needs.
type piecesConn struct {
	net.Conn
	pieces [][]byte
}

func (c *piecesConn) Read(p []byte) (int, error) {
	for len(c.pieces) > 0 && len(c.pieces[0]) == 0 {
		c.pieces = c.pieces[1:]
	}
	if len(c.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.pieces[0])
	c.pieces[0] = c.pieces[0][n:]
	return n, nil
}

func TestInflateConnInflatesWithHeadersSplitAtEveryByte(t *testing.T) {
	in, want := serverStream(1, 40, false)
	for cut := 0; cut <= len(in); cut++ {
		out, err := readThrough(t, in, []int{cut}, 64<<10, DefaultReadLimit)
		if err != io.EOF || !bytes.Equal(out, want) {
			t.Fatalf("split at byte %d of %d: %v; %s", cut, len(in), err, diffAt(out, want))
		}
	}
}

func TestInflateConnInflatesWhateverTheReadAndWriteSizes(t *testing.T) {
	in, want := serverStream(2, 300, true)
	r := rand.New(rand.NewSource(3))
	for _, readSize := range []int{1, 3, 13, 4096, 64 << 10} {
		var writes []int
		for n := 0; n < len(in); {
			w := 1 + r.Intn(3000)
			writes = append(writes, w)
			n += w
		}
		out, err := readThrough(t, in, writes, readSize, DefaultReadLimit)
		if err != io.EOF || !bytes.Equal(out, want) {
			t.Fatalf("reads of %d bytes: %v; %s", readSize, err, diffAt(out, want))
		}
	}
}

func TestInflateConnPassesPlainFramesAsTheyCame(t *testing.T) {
	var in []byte
	for _, f := range tradeFrames(200) {
		in = append(in, f...)
	}
	in = append(in, ControlFrame(OpPing, nil)...)
	out, err := readThrough(t, in, []int{1000, 7, 1}, 4096, DefaultReadLimit)
	if err != io.EOF || !bytes.Equal(out, in) {
		t.Fatalf("%v; %s", err, diffAt(out, in))
	}
}

func diffAt(got, want []byte) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at byte %d of %d (got %d bytes)", i, len(want), len(got))
		}
	}
	return fmt.Sprintf("got %d bytes, want %d", len(got), len(want))
}

// bomb is mib MiB of spaces compressed to about a thousandth of that, as
// a compressed message's payload.
func bomb(mib int) []byte {
	var z bytes.Buffer
	fw, _ := flate.NewWriter(&z, flate.BestCompression)
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for range mib {
		_, _ = fw.Write(chunk)
	}
	_ = fw.Flush()
	return bytes.TrimSuffix(z.Bytes(), syncTail)
}

func TestInflateConnRefusesABombWithoutInflatingIt(t *testing.T) {
	z := bomb(64)
	in := appendFrag(nil, 0, 1, opText, rsv1Bit, z)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := readThrough(t, in, nil, 64<<10, DefaultReadLimit)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrInflatedTooBig) {
		t.Fatalf("got %v, want ErrInflatedTooBig", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("refusing the bomb allocated %d MiB", grew>>20)
	}
	// A compressed frame that says it is a TiB long is refused at its
	// header, before any of it is collected.
	huge := []byte{0xC1, 127, 0, 0, 1, 0, 0, 0, 0, 0, 1, 2, 3}
	if _, err := readThrough(t, huge, nil, 4096, DefaultReadLimit); !errors.Is(err, ErrInflatedTooBig) {
		t.Fatalf("a 1 TiB compressed frame: got %v, want ErrInflatedTooBig", err)
	}
}

func TestInflateConnRefusesBrokenCompressedMessages(t *testing.T) {
	z := func(p string) []byte {
		d := NewDeflater()
		_, c := payloadOf(d.AppendFrame(nil, TextFrame([]byte(p))))
		return c
	}
	for name, in := range map[string][]byte{
		"a data frame inside a compressed message": append(appendFrag(nil, 0, 2, opText, rsv1Bit, z("ab")[:1]), TextFrame([]byte("x"))...),
		"RSV1 on a continuation":                   append(appendFrag(nil, 0, 2, opText, rsv1Bit, z("ab")[:1]), 0x80|rsv1Bit, 0),
		"RSV2 on a compressed frame":               {0xE1, 1, 0},
		"a masked compressed frame":                {0xC1, 0x81, 1, 2, 3, 4, 5},
		"a payload that does not inflate":          {0xC1, 3, 0xff, 0xff, 0xff},
	} {
		if _, err := readThrough(t, in, nil, 4096, DefaultReadLimit); !errors.As(err, new(*ProtocolError)) {
			t.Errorf("%s: got %v, want a ProtocolError", name, err)
		}
	}
}

// TestInflaterReadsAnyMixOfMessages inflates messages a compressor with
// context takeover may send: each one compressed by a fresh compressor
// given the whole history as its dictionary, ending in a sync flush (the
// tail taken off), in several sync-flushed parts, or in a final block
// (BFINAL, the tail left on), mixed with plain messages that never enter
// the history. The Inflater, which reads one message after another as one
// stream where it can, must return every one.
func TestInflaterReadsAnyMixOfMessages(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	var history, z bytes.Buffer
	var in Inflater
	for i, f := range tradeFrames(600) {
		_, p := payloadOf(f)
		if i%50 == 7 {
			p = bytes.Repeat(p, 400) // past the window and the 4 KiB reads
		}
		kind := r.Intn(4)
		if kind == 0 {
			continue // plain
		}
		dict := history.Bytes()[max(0, history.Len()-windowSize):]
		z.Reset()
		fw, _ := flate.NewWriterDict(&z, r.Intn(9)+1, dict)
		switch kind {
		case 1:
			_, _ = fw.Write(p)
			_ = fw.Flush()
		case 2:
			k := r.Intn(len(p) + 1)
			_, _ = fw.Write(p[:k])
			_ = fw.Flush()
			_, _ = fw.Write(p[k:])
			_ = fw.Flush()
		case 3:
			_, _ = fw.Write(p)
			_ = fw.Close()
		}
		msg := z.Bytes()
		if kind != 3 {
			msg = bytes.TrimSuffix(msg, syncTail)
		}
		got, err := in.Inflate(msg, 0)
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("message %d (kind %d): %v; %s", i, kind, err, diffAt(got, p))
		}
		history.Write(p)
	}
}

func TestTakeoverAnswer(t *testing.T) {
	head := func(ext ...string) string {
		h := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n"
		for _, e := range ext {
			h += "Sec-WebSocket-Extensions: " + e + "\r\n"
		}
		return h + "\r\n"
	}
	gorilla := "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
	for _, tc := range []struct {
		head string
		ok   bool
	}{
		{head("permessage-deflate; client_no_context_takeover"), true},
		{head("permessage-deflate"), true},
		{strings.Replace(head("permessage-deflate"), "101 Switching Protocols", "101", 1), true},
		{head("permessage-deflate; server_max_window_bits=10"), true},
		{head("permessage-deflate;client_no_context_takeover ; server_max_window_bits=\"15\""), true},
		{head(gorilla), false},
		{head(), false},
		{head("permessage-deflate; server_max_window_bits=16"), false},
		{head("permessage-deflate; client_max_window_bits=10"), false},
		{head("permessage-deflate; client_no_context_takeover; client_no_context_takeover"), false},
		{head("permessage-deflate; mystery"), false},
		{head("permessage-deflate, x-other"), false},
		{head("permessage-deflate", "permessage-deflate"), false},
		{strings.Replace(head("permessage-deflate"), "101 Switching Protocols", "401 Unauthorized", 1), false},
		{strings.Replace(head("permessage-deflate"), "101 Switching Protocols", "1010", 1), false},
	} {
		got, ok := takeoverAnswer([]byte(tc.head))
		want := tc.head
		if tc.ok {
			want = head(gorilla)
		}
		if tc.ok && strings.HasPrefix(tc.head, "HTTP/1.1 101\r\n") {
			want = strings.Replace(want, "101 Switching Protocols", "101", 1)
		}
		if ok != tc.ok || string(got) != want {
			t.Errorf("%q: %v %q, want %v %q", tc.head, ok, got, tc.ok, want)
		}
	}
}

// handshakeServer accepts one WebSocket client on 127.0.0.1, answers its
// handshake with ext as the extension line ("" none) and then writes
// frames. It returns the URL and a channel with the extension line the
// client offered.
func handshakeServer(t testing.TB, ext string, frames []byte) (string, <-chan string) {
	return oneUpgrade(t, "/s", ext, frames, func(nc net.Conn) { _, _ = io.Copy(io.Discard, nc) })
}

// oneUpgrade accepts one WebSocket client on 127.0.0.1 at path, answers its
// handshake with ext as the extension line ("" none) and first in one
// write, as a server's frames may arrive with its answer, then hands the
// connection to then. It returns the URL and a channel with the extension
// line the client offered.
func oneUpgrade(tb testing.TB, path, ext string, first []byte, then func(net.Conn)) (string, <-chan string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	offered := make(chan string, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		req, err := http.ReadRequest(bufio.NewReader(nc))
		if err != nil {
			return
		}
		offered <- req.Header.Get("Sec-WebSocket-Extensions")
		h := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		answer := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
			base64.StdEncoding.EncodeToString(h[:]) + "\r\n"
		if ext != "" {
			answer += "Sec-WebSocket-Extensions: " + ext + "\r\n"
		}
		if _, err := nc.Write(append([]byte(answer+"\r\n"), first...)); err != nil {
			return
		}
		then(nc)
	}()
	return "ws://" + ln.Addr().String() + path, offered
}

// readMessages reads data messages through gorilla until the close.
func readMessages(t testing.TB, conn *websocket.Conn) []string {
	var got []string
	for {
		_, m, err := conn.ReadMessage()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
				t.Fatalf("after %d messages: %v", len(got), err)
			}
			return got
		}
		got = append(got, string(m))
	}
}

// TestGorillaReadsInflatedMessagesThroughTheDialer dials real sockets
// with the client's dialer: it offers server context takeover; a server
// that grants it has its compressed messages read as the rows they were;
// one that answers server_no_context_takeover, as an older streamcast
// does, or nothing, is read by gorilla alone, as before.
func TestGorillaReadsInflatedMessagesThroughTheDialer(t *testing.T) {
	in, _ := serverStream(4, 200, false)
	var want []string
	for _, f := range tradeFrames(200) {
		_, p := payloadOf(f)
		want = append(want, string(p))
	}
	dial := func(url string) *websocket.Conn {
		t.Helper()
		o := DialOptions{}
		u, err := neturl.Parse(url)
		if err != nil {
			t.Fatal(err)
		}
		conn, _, err := takeoverDialer(o.dialer(nil), u, DefaultReadLimit).DialContext(context.Background(), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		return conn
	}

	url, offered := handshakeServer(t, "permessage-deflate; client_no_context_takeover", in)
	got := readMessages(t, dial(url))
	if o := <-offered; o != "permessage-deflate; client_no_context_takeover" {
		t.Errorf("offered %q", o)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("context takeover: %d messages, want %d; first: %.80q", len(got), len(want), got)
	}

	// Without context takeover the server compresses each message on its
	// own, or not at all.
	for _, ext := range []string{"permessage-deflate; server_no_context_takeover; client_no_context_takeover", ""} {
		var frames []byte
		for i, f := range tradeFrames(200) {
			if i%2 == 0 && ext != "" {
				f = NewDeflater().AppendFrame(nil, f)
			}
			frames = append(frames, f...)
		}
		frames = append(frames, ControlFrame(opClose, []byte{0x03, 0xe8})...)
		url, _ := handshakeServer(t, ext, frames)
		if got := readMessages(t, dial(url)); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("answer %q: %d messages, want %d", ext, len(got), len(want))
		}
	}
}

// refFilter is what an inflateConn hands gorilla from the bytes in, worked
// out over the whole of them at once: the fuzz target's reference.
func refFilter(in []byte, limit int) ([]byte, error) {
	var out, msg []byte
	var inf Inflater
	open, op := false, byte(0)
	for i := 0; i < len(in); {
		b0 := in[i]
		inMsg := false
		switch b0 & 0x0f {
		case 0:
			if open {
				if b0&0x70 != 0 {
					return out, &ProtocolError{}
				}
				inMsg = true
			}
		case 1, 2:
			if open {
				return out, &ProtocolError{}
			}
			if b0&0x40 != 0 {
				if b0&0x30 != 0 {
					return out, &ProtocolError{}
				}
				inMsg, open, op, msg = true, true, b0&0x0f, msg[:0]
			}
		}
		rest := func() ([]byte, error) {
			if !inMsg {
				out = append(out, in[i:]...)
			}
			return out, nil
		}
		if i+2 > len(in) {
			return rest()
		}
		hl, n := 2, uint64(in[i+1]&0x7f)
		if in[i+1]&0x80 != 0 {
			hl += 4
		}
		switch n {
		case 126:
			hl += 2
		case 127:
			hl += 8
		}
		if i+hl > len(in) {
			return rest()
		}
		switch n {
		case 126:
			n = uint64(binary.BigEndian.Uint16(in[i+2:]))
		case 127:
			n = binary.BigEndian.Uint64(in[i+2:])
		}
		if n > 1<<62 {
			if !inMsg {
				out = append(out, in[i:i+hl]...)
			}
			return out, &ProtocolError{}
		}
		if inMsg {
			if in[i+1]&0x80 != 0 {
				return out, &ProtocolError{}
			}
			if uint64(len(msg))+n > uint64(limit+limit/64+1024) {
				return out, ErrInflatedTooBig
			}
		}
		if uint64(len(in)-i-hl) < n {
			return rest()
		}
		end := i + hl + int(n)
		if !inMsg {
			out = append(out, in[i:end]...)
		} else {
			msg = append(msg, in[i+hl:end]...)
			if b0&0x80 != 0 {
				open = false
				p, err := inf.Inflate(msg, limit)
				if errors.Is(err, ErrInflatedTooBig) {
					return out, err
				}
				if err != nil {
					return out, &ProtocolError{}
				}
				out = appendHeader(out, op, len(p))
				out = append(out, p...)
			}
		}
		i = end
	}
	return out, nil
}

// FuzzInflateConn reads any bytes a server may send through an
// inflateConn, split into two writes at cut and read readSize bytes at a
// time: it must hand on exactly what refFilter works out from the whole,
// and end with the same kind of error, whatever the split.
func FuzzInflateConn(f *testing.F) {
	in, _ := serverStream(5, 12, false)
	f.Add(in, uint16(40), uint8(0))
	in, _ = serverStream(6, 6, false)
	f.Add(in, uint16(3), uint8(5))
	f.Add(appendFrag(nil, 0, 1, opText, rsv1Bit, bomb(1)), uint16(1), uint8(9))
	f.Add([]byte{0xC1, 127, 0, 0, 1, 0, 0, 0, 0, 0}, uint16(2), uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, cut uint16, readSize uint8) {
		const limit = 4096
		want, wantErr := refFilter(in, limit)
		got, err := readThrough(t, in, []int{int(cut)}, 1+int(readSize), limit)
		if !bytes.Equal(got, want) {
			t.Fatalf("handed on %q, want %q", got, want)
		}
		switch {
		case wantErr == nil:
			if err != io.EOF {
				t.Fatalf("ended with %v, want the bytes to run out", err)
			}
		case errors.Is(wantErr, ErrInflatedTooBig):
			if !errors.Is(err, ErrInflatedTooBig) {
				t.Fatalf("ended with %v, want ErrInflatedTooBig", err)
			}
		default:
			if !errors.As(err, new(*ProtocolError)) {
				t.Fatalf("ended with %v, want a ProtocolError", err)
			}
		}
	})
}
