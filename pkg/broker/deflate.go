package broker

import (
	"bytes"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// permessage-deflate (RFC 7692).
//
// gorilla/websocket negotiates the extension only without context
// takeover, and refuses a Sec-WebSocket-Extensions header of the
// application's. The server still lets gorilla do the handshake (it checks
// the request and reads the peer's frames, inflating each compressed
// message on its own, which client_no_context_takeover makes exact), and
// replaces the one extension line gorilla writes in its 101 answer with
// the server's own (peerConn.Write). That costs one byte comparison per
// upgrade, keeps every other part of the handshake gorilla's, and fails
// safe: if the line is not found (a gorilla that words it otherwise), the
// answer goes out as gorilla wrote it and the connection sends plain
// frames, which the extension always allows.
//
// Subscribers that negotiated server context takeover get their frames
// compressed with history, and the compression is shared: caught-up
// subscribers with the same where= that have received the same compressed
// messages since a reset point share one wire.Deflater (a deflateGroup),
// so a frame is compressed once per group, and the group's compressed
// frames are shared between its members as the encoded frame is. A
// compressor may start afresh at any message without telling the
// receiver, since a message that refers to nothing before it inflates
// whatever the receiver's history holds: a subscriber joins its group at
// the group's next reset, and until then gets plain frames, which do not
// enter its history. A replay is compressed by a Deflater of its own.

// gorillaDeflateLine is the extension line gorilla's Upgrader writes when
// EnableCompression is set and the client offered permessage-deflate.
const gorillaDeflateLine = "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover\r\n"

// deflateMode is what a connection negotiated.
type deflateMode uint8

const (
	// deflateOff: not negotiated; the connection is exactly as without
	// the extension.
	deflateOff deflateMode = iota
	// deflatePlain: negotiated without server context takeover (the
	// client asked for none, as gorilla's clients do, or for a window
	// smaller than compress/flate's): the peer may send compressed
	// messages, the server sends plain ones. A 100-byte row compressed on
	// its own hardly shrinks, so compressing it would cost CPU for nothing.
	deflatePlain
	// deflateContext: server context takeover; a subscriber's frames are
	// compressed with history.
	deflateContext
)

// deflateOffer is the server's answer to a client's permessage-deflate
// offers: the mode and the extension line of the 101 answer.
type deflateOffer struct {
	Mode deflateMode
	Line string // "Sec-WebSocket-Extensions: …\r\n"
}

// negotiateDeflate picks the first permessage-deflate offer in h the
// server can honour (RFC 7692 §5). The server always answers
// client_no_context_takeover (§7.1.1.2 lets it), because gorilla inflates
// each message on its own. publisher connections get no server context
// takeover: the server's replies to them go out plain.
func negotiateDeflate(h http.Header, publisher bool) deflateOffer {
	for _, v := range h.Values("Sec-Websocket-Extensions") {
		for _, offer := range strings.Split(v, ",") {
			params := strings.Split(offer, ";")
			if strings.TrimSpace(params[0]) != "permessage-deflate" {
				continue
			}
			mode := deflateContext
			if publisher {
				mode = deflatePlain
			}
			serverBits := ""
			ok := true
			seen := map[string]bool{}
			for _, p := range params[1:] {
				name, val, hasVal := strings.Cut(strings.TrimSpace(p), "=")
				name = strings.TrimSpace(name)
				val = strings.Trim(strings.TrimSpace(val), `"`)
				if seen[name] {
					ok = false // a parameter twice: decline the offer (§7.1)
					break
				}
				seen[name] = true
				switch name {
				case "server_no_context_takeover":
					ok = !hasVal
					mode = deflatePlain
				case "client_no_context_takeover":
					ok = !hasVal
				case "server_max_window_bits":
					ok = hasVal && validBits(val)
					serverBits = val
					if val != "15" {
						// compress/flate's window is 32 KiB, always.
						mode = deflatePlain
					}
				case "client_max_window_bits":
					ok = !hasVal || validBits(val)
				default:
					ok = false
				}
				if !ok {
					break
				}
			}
			if !ok {
				continue
			}
			var b strings.Builder
			b.WriteString("Sec-WebSocket-Extensions: permessage-deflate")
			if mode == deflatePlain {
				b.WriteString("; server_no_context_takeover")
			}
			b.WriteString("; client_no_context_takeover")
			if serverBits != "" {
				b.WriteString("; server_max_window_bits=" + serverBits)
			}
			b.WriteString("\r\n")
			return deflateOffer{Mode: mode, Line: b.String()}
		}
	}
	return deflateOffer{}
}

// validBits reports whether v is a window size RFC 7692 allows (8 to 15).
func validBits(v string) bool {
	return len(v) == 1 && v[0] == '8' || len(v) == 1 && v[0] == '9' || v == "10" || v == "11" || v == "12" || v == "13" || v == "14" || v == "15"
}

// rewriteDeflateLine replaces gorilla's extension line in the 101 answer p
// with line, and reports whether it found it.
func rewriteDeflateLine(p []byte, line string) ([]byte, bool) {
	i := bytes.Index(p, []byte(gorillaDeflateLine))
	if i < 0 {
		return p, false
	}
	out := make([]byte, 0, len(p)-len(gorillaDeflateLine)+len(line))
	out = append(out, p[:i]...)
	out = append(out, line...)
	return append(out, p[i+len(gorillaDeflateLine):]...), true
}

// deflateMinRun is how many messages a group compresses before it resets
// for a subscriber waiting to join: a reset costs its members the history
// (the next few messages compress worse), so joiners arriving one after
// another cost at most one reset per run.
const deflateMinRun = 64

// deflateGroup is the subscribers of a stream with the same filter that
// share one compressor (see the top of this file). Guarded by the
// stream's fan-out lock.
type deflateGroup struct {
	key     any // the filter (nil: every row), or the subscriber when compressing per connection
	filter  *schema.Filter
	d       *wire.Deflater
	members int
	waiting int    // subscribers waiting for the next reset to join
	gen     uint64 // the delivery out was compressed for
	out     [][]byte
}

// deflateBudget bounds the compressors the server holds at once
// (limits.max_compression_bytes, wire.DeflaterBytes each): the groups'
// and the compressed replays'. One past it is not refused; its subscriber
// gets plain frames, which the extension allows: compression saves bytes,
// it is never needed to deliver a row.
type deflateBudget struct {
	max  int64
	held atomic.Int64
	// deferred counts subscribers that got plain frames for want of a
	// compressor: each live subscriber once, each replay once.
	deferred atomic.Int64
}

func newDeflateBudget(maxBytes int) *deflateBudget {
	return &deflateBudget{max: int64(maxBytes) / wire.DeflaterBytes}
}

// acquire takes a compressor's place, reporting false when none is free.
func (b *deflateBudget) acquire() bool {
	for {
		n := b.held.Load()
		if n >= b.max {
			return false
		}
		if b.held.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (b *deflateBudget) release() { b.held.Add(-1) }

// deflateGroups is a stream's compression groups; guarded by the fan-out lock.
type deflateGroups struct {
	byKey   map[any]*deflateGroup
	waiting []*subscriber // compressing subscribers not in a group yet
	gen     uint64        // deliveries so far
	budget  *deflateBudget
	// perConn gives every subscriber a compressor of its own (measured
	// against the shared groups; see docs/benchmarks.md).
	perConn bool
}

// add queues sub, which negotiated context takeover, to join its group;
// the fan-out lock is held.
func (gs *deflateGroups) add(sub *subscriber) {
	sub.waitIdx = len(gs.waiting)
	gs.waiting = append(gs.waiting, sub)
	g := gs.group(sub)
	g.waiting++
}

func (gs *deflateGroups) keyOf(sub *subscriber) any {
	if gs.perConn {
		return sub
	}
	if sub.filter == nil {
		return nil
	}
	return sub.filter
}

// group returns sub's group, made when it has none.
func (gs *deflateGroups) group(sub *subscriber) *deflateGroup {
	k := gs.keyOf(sub)
	g := gs.byKey[k]
	if g == nil {
		if gs.byKey == nil {
			gs.byKey = map[any]*deflateGroup{}
		}
		g = &deflateGroup{key: k, filter: sub.filter}
		gs.byKey[k] = g
	}
	return g
}

// remove takes sub out of its group or the waiting list; the fan-out lock
// is held. A group with no one left lets its compressor go.
func (gs *deflateGroups) remove(sub *subscriber) {
	if sub.waitIdx >= 0 {
		last := len(gs.waiting) - 1
		gs.waiting[sub.waitIdx] = gs.waiting[last]
		gs.waiting[sub.waitIdx].waitIdx = sub.waitIdx
		gs.waiting[last] = nil
		gs.waiting = gs.waiting[:last]
		sub.waitIdx = -1
		if g := gs.byKey[gs.keyOf(sub)]; g != nil {
			g.waiting--
			gs.dropIfEmpty(g)
		}
	}
	if g := sub.group; g != nil {
		sub.group = nil
		g.members--
		gs.dropIfEmpty(g)
	}
}

func (gs *deflateGroups) dropIfEmpty(g *deflateGroup) {
	if g.members == 0 && g.waiting == 0 {
		delete(gs.byKey, g.key)
		if g.d != nil {
			gs.budget.release()
		}
		g.d, g.out = nil, nil
	}
}

// admit lets the waiting subscribers join their groups where a group can
// take them now: one with no members starts afresh, one that compressed
// deflateMinRun messages since its reset resets. A group that has no
// compressor yet takes one from the budget, or its subscribers wait on,
// receiving plain frames. Called at the start of a delivery, under the
// fan-out lock, before anything of it is compressed.
func (gs *deflateGroups) admit() {
	gs.gen++
	if len(gs.waiting) == 0 {
		return
	}
	kept := gs.waiting[:0]
	for _, sub := range gs.waiting {
		g := gs.byKey[gs.keyOf(sub)]
		switch {
		case g.members == 0 && g.d == nil && !gs.budget.acquire():
			// No compressor free for a group that has none (a successful
			// acquire falls through to the next case, which makes it):
			// sub waits on, receiving plain frames.
			if !sub.deflateDeferred {
				sub.deflateDeferred = true
				gs.budget.deferred.Add(1)
			}
			sub.waitIdx = len(kept)
			kept = append(kept, sub)
			continue
		case g.members == 0:
			if g.d == nil {
				g.d = wire.NewDeflater()
			} else {
				g.d.Reset()
			}
		case g.d.Messages >= deflateMinRun && g.gen != gs.gen:
			// Reset once, before this delivery: every waiting member
			// of g joins at the same point.
			g.d.Reset()
		case g.d.Messages == 0:
			// Reset already, for another joiner of this delivery.
		default:
			sub.waitIdx = len(kept)
			kept = append(kept, sub)
			continue
		}
		g.waiting--
		g.members++
		sub.group, sub.waitIdx = g, -1
	}
	clear(gs.waiting[len(kept):])
	gs.waiting = kept
}

// frames returns g's compressed frames of this delivery (nil where match
// says the row is not g's), compressing them on the first call.
func (gs *deflateGroups) frames(g *deflateGroup, frames [][]byte, match []bool) [][]byte {
	if g.gen == gs.gen {
		return g.out
	}
	g.gen = gs.gen
	size := 0
	for i, f := range frames {
		if match == nil || match[i] {
			size += len(f)
		}
	}
	arena := make([]byte, 0, size/2+64)
	ends := make([]int, len(frames))
	for i, f := range frames {
		if match == nil || match[i] {
			arena = g.d.AppendFrame(arena, f)
		}
		ends[i] = len(arena)
	}
	out := make([][]byte, len(frames))
	start := 0
	for i, end := range ends {
		if end > start {
			out[i] = arena[start:end:end]
		}
		start = end
	}
	g.out = out
	return out
}

// forget drops the compressed frames of the delivery that ended, so a
// group does not pin them until its next one.
func (gs *deflateGroups) forget() {
	for _, g := range gs.byKey {
		g.out = nil
	}
}
