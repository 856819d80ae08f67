package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/streamcast/streamcast/pkg/schema"
)

// Protocol is the protocol version this package writes in greetings.
const Protocol = 4

// ProtocolNext is the newest version a reader accepts besides Protocol (kept
// for rolling upgrades: readers accept 4 and 5, writers emit 4).
const ProtocolNext = 5

// Null is the value of an integer field (offset, ts, end_offset, a reason's
// number) that is JSON null on the wire or absent from a reason: offsets and
// stamps are never negative, so -1 cannot collide with a real value.
const Null int64 = -1

// Close codes. 1000, 1001 and 1009 are RFC 6455's; the 44xx codes mirror their
// HTTP cousins in the private range and always carry a JSON reason.
const (
	CloseNormal                 = 1000 // clean end, either side
	CloseGoingAway              = 1001 // server stopping; resume elsewhere or later
	CloseTooBig                 = 1009 // a publish frame over max_message_bytes
	CloseBadRequest             = 4400 // bad path, query or where=
	CloseNoSuchStream           = 4404 // reason carries "serves"
	CloseSuperseded             = 4409 // a newer connection took this publisher id
	CloseRetired                = 4410 // the stream is retired; no more publishing
	CloseExactlyOnceUnavailable = 4412 // publisher= on a stream without exactly-once
	CloseNotReplayable          = 4416 // ?offset cannot be served exactly; reason carries "why"
	CloseRelay                  = 4421 // publish to a relay; reason carries the "upstream" to publish to
	CloseTooSlow                = 4429 // subscriber overflowed max_backlog; reason carries the resume offset
)

// MaxReasonBytes is the longest close reason RFC 6455 allows (125 bytes of
// control payload minus the 2-byte code).
const MaxReasonBytes = 123

// Values of "why" in a 4416 (NotReplayable) reason.
const (
	WhyNotDurable = "not_durable" // a live-only stream keeps no log, so it has no offsets
	WhyEmpty      = "empty"       // nothing to replay (legacy servers, offset=0 on an empty log)
	WhyAhead      = "ahead"       // the offset is past the frontier
	WhyTooOld     = "too_old"     // further back than max_replay rows
	WhyEvicted    = "evicted"     // below the earliest row the server's tiers still hold
)

// Values of "error" in a close reason. The close code decides the error type;
// these names make a reason readable on its own (wscat prints it).
const (
	ReasonBadRequest             = "bad_request"
	ReasonNoSuchStream           = "no_such_stream"
	ReasonSuperseded             = "superseded"
	ReasonRetired                = "retired"
	ReasonExactlyOnceUnavailable = "exactly_once_unavailable"
	ReasonNotReplayable          = "not_replayable"
	ReasonTooSlow                = "too_slow"
	ReasonRelay                  = "relay"
	ReasonGoingAway              = "going_away"
)

// RelayChainHeader is the header of a server's 101 answer that lists, comma
// separated, the streams a stream's rows pass through to reach the one
// answering, each as SERVER-ID/STREAM: the answering stream first, then,
// when it is a relay, its upstream's chain. A relay stream that finds itself
// there would mirror its own rows round a loop with no writer, and refuses.
// Server ids are random per server process.
const RelayChainHeader = "Streamcast-Relay-Chain"

// MaxRelayChain bounds the ids a server passes on in RelayChainHeader.
const MaxRelayChain = 32

// Values of "why" in a 1001 close reason.
const (
	WhyServerStopping = "server_stopping" // the whole server is shutting down
	WhyStreamStopped  = "stream_stopped"  // the server stopped serving this stream (removed from its config)
	// WhyStreamMigrating closes a stream's publishers while it moves to a
	// new log; its subscribers stay. Reconnect: writes resume at the seam.
	WhyStreamMigrating = "stream_migrating"
	// WhyStreamRetiring refuses a connection that arrives while its stream
	// is being retired. Reconnect: the stream serves again for replay once
	// retired (a publisher then gets 4410).
	WhyStreamRetiring = "stream_retiring"
)

// Values of "error" in a publish reply.
const (
	ReplyRejected     = "rejected"      // the schema refused a row; nothing committed
	ReplyCommitFailed = "commit_failed" // the log could not commit; nothing committed, resend is safe
	ReplySequenceGap  = "sequence_gap"  // exactly-once: seq skipped past the mark
	ReplyBadFrame     = "bad_frame"     // not a row, a batch or [seq, …]
)

// Range is a half-open offset window [Start, End), written as [start,end].
type Range struct {
	Start int64
	End   int64
}

// MarshalJSON writes the range as a two-element array.
func (r Range) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 24)
	b = append(b, '[')
	b = strconv.AppendInt(b, r.Start, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, r.End, 10)
	return append(b, ']'), nil
}

// UnmarshalJSON reads a two-element integer array.
func (r *Range) UnmarshalJSON(data []byte) error {
	var v [2]int64
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || len(raw) != 2 {
		return fmt.Errorf("replay is %.40s, not [start,end]", data)
	}
	for i := range raw {
		if err := json.Unmarshal(raw[i], &v[i]); err != nil {
			return fmt.Errorf("replay is %.40s, not [start,end] of integers", data)
		}
	}
	r.Start, r.End = v[0], v[1]
	return nil
}

// PublisherMark is an exactly-once publisher's position, sent in its greeting:
// every row with seq ≤ LastSeq is in the log; resend from LastSeq+1.
type PublisherMark struct {
	ID         string `json:"id"`
	LastSeq    int64  `json:"last_seq"`    // 0 when this id never published
	LastOffset int64  `json:"last_offset"` // offset of the row carrying LastSeq; Null when unknown
}

// Greeting is the first frame of every accepted connection, subscriber or
// publisher. Field order on the wire is the declaration order below; readers
// never depend on it.
type Greeting struct {
	Streamcast   int             `json:"streamcast"`          // protocol version, Protocol when written
	Stream       string          `json:"stream"`              // stream name; "" is the stream served at /
	EndOffset    int64           `json:"end_offset"`          // frontier at attach (next offset to be assigned); Null on a live-only stream
	Replay       *Range          `json:"replay"`              // [start, end) about to be replayed; nil for live subscribes and publishers
	Durable      bool            `json:"durable"`             // a log is attached: offsets survive restarts
	GroupCommit  bool            `json:"group_commit"`        // sends may share a commit
	Schema       json.RawMessage `json:"schema"`              // the stream's JSON Schema; nil = no schema (written as null)
	Metadata     string          `json:"metadata"`            // URI of the stream's plain metadata copy; "" = null
	MetadataHint string          `json:"metadata_hint"`       // URI of its version-hint.text; "" = null
	StreamID     string          `json:"stream_id"`           // stream identity; "" = null
	Where        json.RawMessage `json:"where"`               // echo of the applied filter; nil = null
	Publisher    *PublisherMark  `json:"publisher,omitempty"` // exactly-once publishers only
}

// MarshalJSON is AppendJSON.
func (g Greeting) MarshalJSON() ([]byte, error) { return g.AppendJSON(nil), nil }

// AppendJSON appends the greeting as compact JSON, keys in declaration order,
// "" and nil written as null. Schema and Where are copied as given (compacted
// when they are valid JSON; replaced by null when they are not).
func (g *Greeting) AppendJSON(dst []byte) []byte {
	v := g.Streamcast
	if v == 0 {
		v = Protocol
	}
	dst = append(dst, `{"streamcast":`...)
	dst = strconv.AppendInt(dst, int64(v), 10)
	dst = append(dst, `,"stream":`...)
	dst = AppendString(dst, g.Stream)
	dst = append(dst, `,"end_offset":`...)
	dst = appendIntOrNull(dst, g.EndOffset)
	dst = append(dst, `,"replay":`...)
	if g.Replay == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		dst = strconv.AppendInt(dst, g.Replay.Start, 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, g.Replay.End, 10)
		dst = append(dst, ']')
	}
	dst = append(dst, `,"durable":`...)
	dst = strconv.AppendBool(dst, g.Durable)
	dst = append(dst, `,"group_commit":`...)
	dst = strconv.AppendBool(dst, g.GroupCommit)
	dst = append(dst, `,"schema":`...)
	dst = appendRaw(dst, g.Schema)
	dst = append(dst, `,"metadata":`...)
	dst = appendStringOrNull(dst, g.Metadata)
	dst = append(dst, `,"metadata_hint":`...)
	dst = appendStringOrNull(dst, g.MetadataHint)
	dst = append(dst, `,"stream_id":`...)
	dst = appendStringOrNull(dst, g.StreamID)
	dst = append(dst, `,"where":`...)
	dst = appendRaw(dst, g.Where)
	if p := g.Publisher; p != nil {
		dst = append(dst, `,"publisher":{"id":`...)
		dst = AppendString(dst, p.ID)
		dst = append(dst, `,"last_seq":`...)
		dst = strconv.AppendInt(dst, p.LastSeq, 10)
		dst = append(dst, `,"last_offset":`...)
		dst = appendIntOrNull(dst, p.LastOffset)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// ParseGreeting reads a greeting leniently, as a reader must: keys in any
// order, unknown keys ignored, a non-object schema or where and a non-string
// metadata, metadata_hint or stream_id read as absent. It refuses what is not a
// streamcast greeting at all, or a version other than 4 or 5, with a
// *ProtocolError.
func ParseGreeting(data []byte) (*Greeting, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return nil, &ProtocolError{Msg: fmt.Sprintf("the first frame is not a streamcast greeting (not a JSON object): %s", clip(data, 60))}
	}
	rawV, ok := m["streamcast"]
	if !ok {
		return nil, &ProtocolError{Msg: fmt.Sprintf("the first frame is not a streamcast greeting (no \"streamcast\" key): %s", clip(data, 60))}
	}
	var v int
	if err := json.Unmarshal(rawV, &v); err != nil {
		return nil, &ProtocolError{Msg: fmt.Sprintf("greeting version is %s, not an integer", clip(rawV, 20))}
	}
	if v != Protocol && v != ProtocolNext {
		return nil, &ProtocolError{Msg: fmt.Sprintf("the server speaks streamcast %d; this client reads %d and %d — upgrade the client or the server", v, Protocol, ProtocolNext)}
	}
	g := &Greeting{Streamcast: v, EndOffset: Null}
	str := func(key string) string {
		var s string
		if r, ok := m[key]; ok && json.Unmarshal(r, &s) == nil {
			return s
		}
		return ""
	}
	boolean := func(key string) bool {
		var b bool
		if r, ok := m[key]; ok && json.Unmarshal(r, &b) == nil {
			return b
		}
		return false
	}
	object := func(key string) json.RawMessage {
		r, ok := m[key]
		if !ok {
			return nil
		}
		t := firstByte(r)
		if t != '{' {
			return nil
		}
		return append(json.RawMessage(nil), r...)
	}
	g.Stream = str("stream")
	g.Metadata = str("metadata")
	g.MetadataHint = str("metadata_hint")
	g.StreamID = str("stream_id")
	g.Durable = boolean("durable")
	g.GroupCommit = boolean("group_commit")
	g.Schema = object("schema")
	g.Where = object("where")
	if r, ok := m["end_offset"]; ok && firstByte(r) != 'n' {
		var n int64
		if err := json.Unmarshal(r, &n); err != nil || n < 0 {
			return nil, &ProtocolError{Msg: fmt.Sprintf("greeting end_offset is %s, not an offset", clip(r, 30))}
		}
		g.EndOffset = n
	}
	if r, ok := m["replay"]; ok && firstByte(r) != 'n' {
		var rg Range
		if err := rg.UnmarshalJSON(r); err != nil || rg.Start < 0 || rg.End < rg.Start {
			return nil, &ProtocolError{Msg: fmt.Sprintf("greeting replay is %s, not [start,end] with start ≤ end", clip(r, 40))}
		}
		g.Replay = &rg
	}
	if r, ok := m["publisher"]; ok && firstByte(r) == '{' {
		var p struct {
			ID         string          `json:"id"`
			LastSeq    int64           `json:"last_seq"`
			LastOffset json.RawMessage `json:"last_offset"`
		}
		if err := json.Unmarshal(r, &p); err != nil {
			return nil, &ProtocolError{Msg: fmt.Sprintf("greeting publisher mark is %s, not {id,last_seq,last_offset}", clip(r, 60))}
		}
		mark := &PublisherMark{ID: p.ID, LastSeq: p.LastSeq, LastOffset: Null}
		if len(p.LastOffset) > 0 && firstByte(p.LastOffset) != 'n' {
			if err := json.Unmarshal(p.LastOffset, &mark.LastOffset); err != nil {
				return nil, &ProtocolError{Msg: fmt.Sprintf("greeting publisher last_offset is %s, not an offset", clip(p.LastOffset, 30))}
			}
		}
		g.Publisher = mark
	}
	return g, nil
}

// AppendFrame appends the data frame [offset,ts,row]: the one encoding of a
// row on the wire, used for live and replayed frames alike (I4). row must be
// the canonical JSON object; offset or ts equal to Null are written as null.
func AppendFrame(dst []byte, offset, ts int64, row []byte) []byte {
	dst = append(dst, '[')
	dst = appendIntOrNull(dst, offset)
	dst = append(dst, ',')
	dst = appendIntOrNull(dst, ts)
	dst = append(dst, ',')
	dst = append(dst, row...)
	return append(dst, ']')
}

// Reply is a publish reply, one per publish frame, in send order.
type Reply struct {
	OK        []int64 // offsets of the frame's rows (Null entries on a live-only stream or for forgotten duplicates); nil on an error
	Duplicate bool    // exactly-once: the frame was at or below the mark and was not appended again
	Error     string  // "" on success, else one of the Reply* codes (or a newer one)
	Detail    string  // rejected, commit_failed, bad_frame: what went wrong
	Expected  int64   // sequence_gap: the next seq the server expects
	Got       int64   // sequence_gap: the seq it got
}

// Err is the reply as an error: nil for "ok", else *Rejected, *CommitFailed,
// *SequenceGap, *BadFrame, or a *ProtocolError for an error code this client
// does not know.
func (r *Reply) Err() error {
	switch r.Error {
	case "":
		return nil
	case ReplyRejected:
		return &Rejected{Detail: r.Detail}
	case ReplyCommitFailed:
		return &CommitFailed{Detail: r.Detail}
	case ReplySequenceGap:
		return &SequenceGap{Expected: r.Expected, Got: r.Got}
	case ReplyBadFrame:
		return &BadFrame{Detail: r.Detail}
	default:
		d := r.Detail
		if d == "" {
			d = "no detail"
		}
		return &ProtocolError{Msg: fmt.Sprintf("the server answered a publish with error %q (%s), which this client does not know", r.Error, d)}
	}
}

// AppendJSON appends the reply as compact JSON: {"ok":[...]} (plus
// "duplicate":true), or {"error":...} with the fields its code carries.
func (r *Reply) AppendJSON(dst []byte) []byte {
	if r.Error == "" {
		dst = append(dst, `{"ok":[`...)
		for i, o := range r.OK {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendIntOrNull(dst, o)
		}
		dst = append(dst, ']')
		if r.Duplicate {
			dst = append(dst, `,"duplicate":true`...)
		}
		return append(dst, '}')
	}
	dst = append(dst, `{"error":`...)
	dst = AppendString(dst, r.Error)
	if r.Error == ReplySequenceGap {
		dst = append(dst, `,"expected":`...)
		dst = strconv.AppendInt(dst, r.Expected, 10)
		dst = append(dst, `,"got":`...)
		dst = strconv.AppendInt(dst, r.Got, 10)
	}
	if r.Detail != "" || r.Error != ReplySequenceGap {
		dst = append(dst, `,"detail":`...)
		dst = AppendString(dst, r.Detail)
	}
	return append(dst, '}')
}

// AppendOK appends {"ok":[first,first+1,…,first+n-1]}, the reply to a frame of
// n rows committed at first. first == Null writes n nulls (live-only stream).
func AppendOK(dst []byte, first int64, n int) []byte {
	dst = append(dst, `{"ok":[`...)
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		if first == Null {
			dst = append(dst, "null"...)
		} else {
			dst = strconv.AppendInt(dst, first+int64(i), 10)
		}
	}
	return append(dst, "]}"...)
}

// AppendErrorReply appends {"error":code,"detail":detail}.
func AppendErrorReply(dst []byte, code, detail string) []byte {
	r := Reply{Error: code, Detail: detail}
	return r.AppendJSON(dst)
}

// ParseReply reads a publish reply into r, reusing r.OK's storage. It returns
// a *ProtocolError for anything that is not a reply.
func ParseReply(data []byte, r *Reply) error {
	ok := r.OK[:0]
	*r = Reply{OK: ok, Expected: Null, Got: Null}
	if fastOK(data, r) {
		return nil
	}
	r.OK = ok[:0]
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return &ProtocolError{Msg: fmt.Sprintf("publish reply is not a JSON object: %s", clip(data, 60))}
	}
	if raw, has := m["ok"]; has {
		var offs []json.RawMessage
		if firstByte(raw) != 'n' {
			if err := json.Unmarshal(raw, &offs); err != nil {
				return &ProtocolError{Msg: fmt.Sprintf("publish reply ok is %s, not a list of offsets", clip(raw, 40))}
			}
		}
		for _, o := range offs {
			if firstByte(o) == 'n' {
				r.OK = append(r.OK, Null)
				continue
			}
			var n int64
			if err := json.Unmarshal(o, &n); err != nil || n < 0 {
				return &ProtocolError{Msg: fmt.Sprintf("publish reply offset %s is not an offset", clip(o, 30))}
			}
			r.OK = append(r.OK, n)
		}
		if d, has := m["duplicate"]; has {
			_ = json.Unmarshal(d, &r.Duplicate)
		}
		return nil
	}
	raw, has := m["error"]
	if !has || json.Unmarshal(raw, &r.Error) != nil || r.Error == "" {
		return &ProtocolError{Msg: fmt.Sprintf("publish reply has neither ok nor error: %s", clip(data, 60))}
	}
	if d, has := m["detail"]; has {
		if json.Unmarshal(d, &r.Detail) != nil {
			r.Detail = string(d)
		}
	}
	if e, has := m["expected"]; has {
		_ = json.Unmarshal(e, &r.Expected)
	}
	if g, has := m["got"]; has {
		_ = json.Unmarshal(g, &r.Got)
	}
	return nil
}

// fastOK parses exactly {"ok":[n,n,…]} (the common reply) without
// encoding/json; anything else reports false and goes the slow way.
func fastOK(data []byte, r *Reply) bool {
	const prefix = `{"ok":[`
	if len(data) < len(prefix)+2 || string(data[:len(prefix)]) != prefix {
		return false
	}
	i := len(prefix)
	if data[i] == ']' {
		return string(data[i:]) == "]}"
	}
	for {
		n, j, ok := scanUint(data, i)
		if !ok {
			return false
		}
		r.OK = append(r.OK, n)
		if j >= len(data) {
			return false
		}
		switch data[j] {
		case ',':
			i = j + 1
		case ']':
			return string(data[j:]) == "]}"
		default:
			return false
		}
	}
}

// scanUint reads a non-negative decimal integer at data[i:], returning the
// value and the index after it. No leading zeros (except "0"), no overflow.
func scanUint(data []byte, i int) (int64, int, bool) {
	start := i
	var n int64
	// 18 digits cannot overflow an int64: no check for them, and offsets
	// and microsecond stamps have 16 at most.
	for end := min(len(data), i+18); i < end; i++ {
		d := data[i] - '0'
		if d > 9 {
			break
		}
		n = n*10 + int64(d)
	}
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		if n > (1<<63-1-9)/10 {
			return 0, i, false
		}
		n = n*10 + int64(data[i]-'0')
		i++
	}
	if i == start || (data[start] == '0' && i-start > 1) {
		return 0, i, false
	}
	return n, i, true
}

func appendIntOrNull(dst []byte, v int64) []byte {
	if v == Null {
		return append(dst, "null"...)
	}
	return strconv.AppendInt(dst, v, 10)
}

func appendStringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return AppendString(dst, s)
}

// appendRaw copies a raw JSON value, compacted; nil or invalid JSON is null.
func appendRaw(dst []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 || !json.Valid(raw) {
		return append(dst, "null"...)
	}
	n := len(dst)
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, raw); err != nil {
		return append(dst[:n], "null"...)
	}
	return buf.Bytes()
}

// AppendString appends s as a JSON string in the one canonical form the
// project writes (schema.AppendJSONString): compact, UTF-8 kept raw, no HTML
// escaping, invalid UTF-8 replaced by U+FFFD.
func AppendString(dst []byte, s string) []byte {
	return schema.AppendJSONString(dst, []byte(s))
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// clip quotes at most n bytes of b for an error message.
func clip(b []byte, n int) string {
	if len(b) <= n {
		return strconv.Quote(string(b))
	}
	return strconv.Quote(string(b[:n])) + "…"
}
