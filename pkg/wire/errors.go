package wire

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Refusal is an error the server sends as a close frame: Code is the close
// code and Reason its compact JSON reason, at most MaxReasonBytes long.
// ParseClose(Code(), Reason()) gives the error back, with the fields the
// reason kept.
type Refusal interface {
	error
	Code() int
	Reason() string
}

// num renders a number from a reason for a sentence: "?" when absent.
func num(v int64) string {
	if v == Null {
		return "?"
	}
	return strconv.FormatInt(v, 10)
}

// BadRequest is close 4400: the path, query or where= is wrong. Detail says
// what; the server keeps it under 80 characters so it survives trimming.
type BadRequest struct {
	Detail string
}

// Error says what the server found wrong with the request.
func (e *BadRequest) Error() string {
	if e.Detail == "" {
		return "the server refused the request as malformed (4400); check the URL's query parameters"
	}
	return "the server refused the request: " + e.Detail
}

// Code is CloseBadRequest.
func (e *BadRequest) Code() int { return CloseBadRequest }

// Reason is {"error":"bad_request","detail":…}, the detail cut to 80 characters.
func (e *BadRequest) Reason() string {
	d := e.Detail
	if utf8Len := len([]rune(d)); utf8Len > 80 {
		d = string([]rune(d)[:79]) + "…"
	}
	return CloseReason(ReasonBadRequest, Field{"detail", d})
}

// StreamNotFound is close 4404: no stream is served at the requested path.
// Serves lists the names the server does serve (nil when the reason did not
// carry the list); Omitted counts names cut from it to fit the close frame.
type StreamNotFound struct {
	Stream  string // the name that was asked for (filled in by the client)
	Serves  []string
	Omitted int
}

// Error names the stream asked for and the ones served.
func (e *StreamNotFound) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no stream %q on this server", e.Stream)
	switch {
	case e.Serves == nil && e.Omitted == 0:
		b.WriteString(" (it did not list the streams it serves)")
	case len(e.Serves) == 0 && e.Omitted == 0:
		b.WriteString("; it serves no streams")
	default:
		names := make([]string, len(e.Serves))
		for i, s := range e.Serves {
			if s == "" {
				s = "(the stream at /)"
			}
			names[i] = strconv.Quote(s)
		}
		fmt.Fprintf(&b, "; it serves %s", strings.Join(names, ", "))
		if e.Omitted > 0 {
			fmt.Fprintf(&b, " and %d more", e.Omitted)
		}
	}
	b.WriteString("; check the URL's path")
	return b.String()
}

// Code is CloseNoSuchStream.
func (e *StreamNotFound) Code() int { return CloseNoSuchStream }

// Reason is {"error":"no_such_stream","serves":[…]}: when every name does not
// fit, {"error":"no_such_stream","omitted":n,"serves":[first names]} with as
// many names as fit. Give the names sorted.
func (e *StreamNotFound) Reason() string {
	if b := encodeReason(ReasonNoSuchStream, []Field{{"serves", e.Serves}}); e.Omitted == 0 && len(b) <= MaxReasonBytes {
		return string(b)
	}
	with := func(k int) []byte {
		return encodeReason(ReasonNoSuchStream, []Field{{"omitted", len(e.Serves) - k + e.Omitted}, {"serves", e.Serves[:k]}})
	}
	k := largest(len(e.Serves), func(k int) bool { return len(with(k)) <= MaxReasonBytes })
	if b := with(k); len(b) <= MaxReasonBytes {
		return string(b)
	}
	return CloseReason(ReasonNoSuchStream)
}

// Superseded is close 4409: a newer connection claimed this exactly-once
// publisher id, so the server closed this older one.
type Superseded struct {
	Publisher string
}

// Error says which publisher id was taken over.
func (e *Superseded) Error() string {
	return fmt.Sprintf("another connection took over publisher %q, so the server closed this one; run one process per publisher id", e.Publisher)
}

// Code is CloseSuperseded.
func (e *Superseded) Code() int { return CloseSuperseded }

// Reason is {"error":"superseded","publisher":id}.
func (e *Superseded) Reason() string {
	return CloseReason(ReasonSuperseded, Field{"publisher", e.Publisher})
}

// StreamRetired is close 4410: the stream was retired and takes no more rows.
// At is the retirement time in µs since the epoch (UTC) and EndOffset its last
// offset + 1; either is Null when the reason lacked it.
type StreamRetired struct {
	Stream    string // filled in by the client
	At        int64
	EndOffset int64
}

// Error says when the stream was retired, where it ended, and the way on
// that exists today: continuing it on a new log with restore --revive, with
// the server stopped.
func (e *StreamRetired) Error() string {
	at := "?"
	if e.At != Null {
		at = time.UnixMicro(e.At).UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("stream %q was retired at %s, ending at offset %s, and takes no more rows; subscribers can still replay it. "+
		"To continue it, stop the server and run `streamcast restore --revive %s`, or publish to a stream under another name", e.Stream, at, num(e.EndOffset), e.Stream)
}

// Code is CloseRetired.
func (e *StreamRetired) Code() int { return CloseRetired }

// Reason is {"error":"retired","at":µs,"end_offset":n}.
func (e *StreamRetired) Reason() string {
	return CloseReason(ReasonRetired, Field{"at", e.At}, Field{"end_offset", e.EndOffset})
}

// ExactlyOnceUnavailable is close 4412: a publisher id was given but the
// stream (Why "stream") or the server (Why "broker") cannot publish exactly once.
type ExactlyOnceUnavailable struct {
	Why string
}

// Error says what lacks exactly-once and how to proceed.
func (e *ExactlyOnceUnavailable) Error() string {
	if e.Why == "broker" {
		return "this server does not support exactly-once publishing; upgrade it, or publish without a publisher id"
	}
	return "this stream does not publish exactly once; set exactly_once: true in its config, or publish without a publisher id"
}

// Code is CloseExactlyOnceUnavailable.
func (e *ExactlyOnceUnavailable) Code() int { return CloseExactlyOnceUnavailable }

// Reason is {"error":"exactly_once_unavailable","why":…}.
func (e *ExactlyOnceUnavailable) Reason() string {
	why := e.Why
	if why == "" {
		why = "stream"
	}
	return CloseReason(ReasonExactlyOnceUnavailable, Field{"why", why})
}

// RelayOnly is close 4421: the stream is a relay, which mirrors Upstream
// and takes no publishers ("421 Misdirected Request": the rows belong to
// another server). Upstream is the stream's URL there, without credentials
// ("" when the reason did not carry it).
type RelayOnly struct {
	Upstream string
}

// Error names the upstream to publish to.
func (e *RelayOnly) Error() string {
	if e.Upstream == "" {
		return "this stream is a relay of another server's stream and takes no publishers; publish to its upstream"
	}
	return "this stream is a relay of " + e.Upstream + " and takes no publishers; publish there"
}

// Code is CloseRelay.
func (e *RelayOnly) Code() int { return CloseRelay }

// Reason is {"error":"relay","upstream":…}; a URL too long for the close
// frame is dropped (trailing fields go first).
func (e *RelayOnly) Reason() string {
	return CloseReason(ReasonRelay, Field{"upstream", e.Upstream})
}

// NotReplayable is close 4416: the requested offset cannot be served exactly.
// Why is one of the Why* constants; the numbers are Null when the reason did
// not carry them. EndOffset is the frontier (next offset to be assigned).
type NotReplayable struct {
	Why       string
	Offset    int64 // the offset asked for
	Earliest  int64 // the earliest offset the server still serves (evicted)
	EndOffset int64 // the frontier
	MaxReplay int64 // the stream's max_replay (too_old)
}

// Error explains the refusal from its numbers and says where to resume.
func (e *NotReplayable) Error() string {
	switch e.Why {
	case WhyNotDurable:
		return "this stream is live-only (no log), so it has no offsets to replay; subscribe without an offset"
	case WhyEmpty:
		return "there is nothing to replay: the stream's log holds no rows any more; subscribe without an offset to read live, or read its history from the stream's published Iceberg table with any Iceberg reader"
	case WhyAhead:
		return fmt.Sprintf("offset %s is past %s, the next offset this stream will assign; the offset came from another or a restored server — resume from %s or earlier", num(e.Offset), num(e.EndOffset), num(e.EndOffset))
	case WhyTooOld:
		resume := Null
		if e.EndOffset != Null && e.MaxReplay != Null {
			resume = e.EndOffset - e.MaxReplay
		}
		return fmt.Sprintf("offset %s is more than max_replay=%s rows behind the frontier %s; resume from offset %s or later, or read the gap from the stream's published Iceberg table with any Iceberg reader", num(e.Offset), num(e.MaxReplay), num(e.EndOffset), num(resume))
	case WhyEvicted:
		return fmt.Sprintf("offset %s is below %s, the earliest offset this stream still serves; resume from %s, or read the gap from the stream's published Iceberg table with any Iceberg reader", num(e.Offset), num(e.Earliest), num(e.Earliest))
	default:
		why := e.Why
		if why == "" {
			why = "no reason given"
		}
		return fmt.Sprintf("the server cannot replay from offset %s (%s); subscribe without an offset to read live", num(e.Offset), why)
	}
}

// Code is CloseNotReplayable.
func (e *NotReplayable) Code() int { return CloseNotReplayable }

// Reason is {"error":"not_replayable","why":…,…} with the fields its Why
// uses, most useful first, since CloseReason drops the last ones of a
// reason too long for the close frame: ahead: offset, end_offset;
// too_old: offset, end_offset, max_replay, earliest (where the published
// tables take over; the resume point end_offset − max_replay matters
// more); evicted: offset, earliest, end_offset; an unknown why: every
// field that is not Null.
func (e *NotReplayable) Reason() string {
	offset, earliest, end, maxReplay := Field{"offset", e.Offset}, Field{"earliest", e.Earliest}, Field{"end_offset", e.EndOffset}, Field{"max_replay", e.MaxReplay}
	var use []Field
	switch e.Why {
	case WhyNotDurable, WhyEmpty:
	case WhyAhead:
		use = []Field{offset, end}
	case WhyTooOld:
		use = []Field{offset, end, maxReplay, earliest}
	case WhyEvicted:
		use = []Field{offset, earliest, end}
	default:
		use = []Field{offset, earliest, end, maxReplay}
	}
	fs := []Field{{"why", e.Why}}
	for _, f := range use {
		if f.Value.(int64) != Null {
			fs = append(fs, f)
		}
	}
	return CloseReason(ReasonNotReplayable, fs...)
}

// TooSlow is close 4429: the subscriber fell more than max_backlog frames
// behind and was dropped after a contiguous prefix. Offset is where to resume
// to lose nothing (Null on a live-only stream, where the missed rows are
// gone); Behind is how many frames it was behind.
type TooSlow struct {
	Offset int64
	Behind int64
}

// Error says where to resume to lose nothing.
func (e *TooSlow) Error() string {
	behind := ""
	if e.Behind != Null {
		behind = " (" + strconv.FormatInt(e.Behind, 10) + " frames)"
	}
	if e.Offset == Null {
		return "the server dropped this subscriber for falling too far behind" + behind + "; the stream is live-only, so the rows it missed are lost — read faster or filter with where="
	}
	return fmt.Sprintf("the server dropped this subscriber for falling too far behind%s; resume at offset %d to lose nothing, and read faster or raise max_backlog", behind, e.Offset)
}

// Code is CloseTooSlow.
func (e *TooSlow) Code() int { return CloseTooSlow }

// Reason is {"error":"too_slow","offset":resume_at,"behind":n}.
func (e *TooSlow) Reason() string {
	return CloseReason(ReasonTooSlow, Field{"offset", e.Offset}, Field{"behind", e.Behind})
}

// GoingAway is close 1001: the server is stopping, or stopped serving the
// stream. Why is the reason's "why" (WhyServerStopping, WhyStreamStopped;
// "" when the reason is not streamcast's JSON), Reason the reason as
// received. Offset is where a subscriber resumes (filled in by the client
// from the last frame it received; Null when nothing was received or the
// stream is live-only).
type GoingAway struct {
	Why    string
	Reason string
	Offset int64
}

// GoingAwayReason is the reason of a 1001 close:
// {"error":"going_away","why":why}.
func GoingAwayReason(why string) string {
	return CloseReason(ReasonGoingAway, Field{"why", why})
}

// Error says the server left and where to resume.
func (e *GoingAway) Error() string {
	var r string
	switch {
	case e.Why == WhyServerStopping:
		r = "the server is shutting down"
	case e.Why == WhyStreamStopped:
		r = "the server stopped serving this stream"
	case e.Why == WhyStreamRetiring:
		r = "the stream is being retired; it serves again for replay in a moment"
	case e.Why != "":
		r = e.Why
	case e.Reason != "" && ParseReason(e.Reason).Error == "":
		r = e.Reason // a plain-text reason (an older server, a proxy)
	default:
		r = "going away"
	}
	if e.Offset == Null {
		return fmt.Sprintf("the server closed the connection (%s); reconnect when it is back", r)
	}
	return fmt.Sprintf("the server closed the connection (%s); reconnect and resume at offset %d to lose nothing", r, e.Offset)
}

// Code is CloseGoingAway.
func (e *GoingAway) Code() int { return CloseGoingAway }

// TooBig is close 1009: a publish frame was larger than the stream's
// max_message_bytes.
type TooBig struct {
	Reason string
}

// Error says a frame was too big and what to send instead.
func (e *TooBig) Error() string {
	return "the server closed the connection because a frame was larger than its max_message_bytes; send smaller batches"
}

// Code is CloseTooBig.
func (e *TooBig) Code() int { return CloseTooBig }

// CloseError is a close with a code this package does not map (or 1006, a
// connection that ended without a close frame).
type CloseError struct {
	Code   int
	Reason string
}

// Error gives the close code and reason.
func (e *CloseError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("the connection closed with code %d", e.Code)
	}
	return fmt.Sprintf("the connection closed with code %d: %s", e.Code, e.Reason)
}

// ProtocolError is a peer that does not speak streamcast as this client
// expects: a bad greeting or frame, offsets that do not increase, a reply
// with neither ok nor error.
type ProtocolError struct {
	Msg string
}

// Error says what the peer got wrong.
func (e *ProtocolError) Error() string { return "streamcast protocol error: " + e.Msg }

// Rejected is a "rejected" publish reply: the schema refused a row (Detail
// names the column). Nothing of the frame was committed; the connection stays
// open.
type Rejected struct {
	Detail string
}

// Error gives the schema's refusal; nothing was committed.
func (e *Rejected) Error() string {
	return "the stream's schema refused the row: " + e.Detail + "; nothing of this send was committed — fix the row and send it again"
}

// AppendReply appends the reply the server sends for this error.
func (e *Rejected) AppendReply(dst []byte) []byte {
	return AppendErrorReply(dst, ReplyRejected, e.Detail)
}

// CommitFailed is a "commit_failed" reply: the server could not commit (disk,
// SQLite). Nothing was committed; the same rows can be sent again unchanged.
type CommitFailed struct {
	Detail string
}

// Error gives the server's failure; resending is safe.
func (e *CommitFailed) Error() string {
	return "the server could not commit the rows: " + e.Detail + "; nothing was committed, so the same rows can be sent again unchanged"
}

// AppendReply appends the reply the server sends for this error.
func (e *CommitFailed) AppendReply(dst []byte) []byte {
	return AppendErrorReply(dst, ReplyCommitFailed, e.Detail)
}

// SequenceGap is a "sequence_gap" reply: an exactly-once frame started past
// the publisher's mark + 1. Nothing was appended.
type SequenceGap struct {
	Expected int64
	Got      int64
}

// Error says which seq to resend from.
func (e *SequenceGap) Error() string {
	return fmt.Sprintf("sequence gap: the server expected seq %s and got %s; nothing was appended — resend from seq %s", num(e.Expected), num(e.Got), num(e.Expected))
}

// AppendReply appends the reply the server sends for this error.
func (e *SequenceGap) AppendReply(dst []byte) []byte {
	r := Reply{Error: ReplySequenceGap, Expected: e.Expected, Got: e.Got}
	return r.AppendJSON(dst)
}

// BadFrame is a "bad_frame" reply: the publish frame was not a row, a
// non-empty batch of rows, or (exactly-once) [seq, rows].
type BadFrame struct {
	Detail string
}

// Error says why the frame was unreadable.
func (e *BadFrame) Error() string {
	return "the server could not read the publish frame: " + e.Detail + "; send a JSON object (one row) or a non-empty array of objects"
}

// AppendReply appends the reply the server sends for this error.
func (e *BadFrame) AppendReply(dst []byte) []byte {
	return AppendErrorReply(dst, ReplyBadFrame, e.Detail)
}

// Compile-time checks that every close-frame error is a Refusal.
var (
	_ Refusal = (*BadRequest)(nil)
	_ Refusal = (*StreamNotFound)(nil)
	_ Refusal = (*Superseded)(nil)
	_ Refusal = (*StreamRetired)(nil)
	_ Refusal = (*ExactlyOnceUnavailable)(nil)
	_ Refusal = (*NotReplayable)(nil)
	_ Refusal = (*TooSlow)(nil)
)

// AccessDenied is the server refusing a handshake for authentication's
// sake, before any WebSocket: Status 401 (no credentials, or bad ones),
// 403 (good credentials without a grant for the stream), 429 (too many
// failed logins of this user name from this address) or 503 (the server
// is checking as many logins as it allows); RetryAfter says when to try
// again after a 429 or 503.
type AccessDenied struct {
	Status     int
	URL        string // the stream URL, without credentials
	Stream     string
	Publish    bool   // the handshake asked to publish (else to read)
	User       string // the user whose credentials were sent; "" for none
	RetryAfter string // seconds, from the 429's or 503's Retry-After
}

// Busy reports whether the refusal was for the server's load (503), not
// for the credentials: trying again shortly may succeed.
func (e *AccessDenied) Busy() bool { return e.Status == 503 }

// Error says which refusal it was and what to do about it.
func (e *AccessDenied) Error() string {
	action := "read"
	if e.Publish {
		action = "publish to"
	}
	switch {
	case e.Status == 429:
		wait := "a while"
		if e.RetryAfter != "" {
			wait = e.RetryAfter + " s"
		}
		return fmt.Sprintf("connect %s: the server refused to check the credentials of this user name from this address for now, after repeated failed logins (HTTP 429); "+
			"retry in %s with the right user name and password", e.URL, wait)
	case e.Status == 503:
		wait := "a second"
		if e.RetryAfter != "" {
			wait = e.RetryAfter + " s"
		}
		return fmt.Sprintf("connect %s: the server is checking too many logins at once (HTTP 503); retry in %s", e.URL, wait)
	case e.Status == 403:
		return fmt.Sprintf("connect %s: user %q may not %s stream %q (HTTP 403): the credentials are good, but no grant in the server's auth: section "+
			"gives this user that; ask the server's operator for one, or use another user", e.URL, e.User, action, e.Stream)
	case e.User == "":
		return fmt.Sprintf("connect %s: the server requires a user name and password to %s stream %q (HTTP 401); "+
			"give them in the URL as ws://USER:PASSWORD@host/… (percent-encoded) or in STREAMCAST_USER and STREAMCAST_PASSWORD", e.URL, action, e.Stream)
	default:
		return fmt.Sprintf("connect %s: the server refused the credentials of user %q: unknown user or wrong password (HTTP 401); "+
			"check the user name and password given in the URL or in STREAMCAST_USER and STREAMCAST_PASSWORD", e.URL, e.User)
	}
}
