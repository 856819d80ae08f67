package broker

// Publishing over plain HTTP: POST /<stream> with a JSON array (or one
// object) or NDJSON as the body is one all-or-nothing batch, taking the
// path a WebSocket publisher's batch frame takes: decoded against the
// schema on the request's goroutine, queued in the stream's inbox, committed
// (fsync) by the committer in a group with everyone else's rows, fanned out,
// and only then answered (I3). The answer's body is the reply the WebSocket
// frame would have got, byte for byte, with an HTTP status that says the
// same: 200 ok, 400 bad_frame, 422 rejected, 409 sequence_gap, 503
// commit_failed.
//
// Exactly-once: the Streamcast-Publisher and Streamcast-Seq headers give a
// request the [seq, rows] frame of a WebSocket publisher with that id. A
// request holds the id only while it is served, and only when nothing else
// holds it: while a WebSocket publisher (or another request) publishes
// under the id, the request is refused 409 publisher_busy and may be sent
// again. A WebSocket publisher that claims the id while a request's rows
// are queued waits, as it waits for a superseded connection's, until they
// are committed, so its greeting's mark counts them.
//
// A POST with an empty body publishes nothing and answers the greeting a
// WebSocket publisher gets (the schema, and with Streamcast-Publisher the
// mark): a client that cannot open a WebSocket checks its rows and resumes
// an exactly-once load from it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/streamcast/streamcast/pkg/broker/auth"
	"github.com/streamcast/streamcast/pkg/broker/control"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// isHTTPPublish reports whether r is an HTTP publish: a POST that is not
// the control API's.
func isHTTPPublish(r *http.Request) bool {
	return r.Method == http.MethodPost && !isControlPath(r.URL.Path)
}

// awaitStart waits until the server has started, or ctx ends (false):
// what a plain HTTP request for a stream does while the server starts.
func (s *Server) awaitStart(ctx context.Context) bool {
	select {
	case <-s.ready:
		return true
	default:
	}
	if s.opts.awaitingStart != nil {
		s.opts.awaitingStart()
	}
	select {
	case <-s.ready:
		return true
	case <-ctx.Done():
		return false
	}
}

// isControlPath reports whether path is the control API's, never a
// stream's.
func isControlPath(path string) bool {
	return path == control.Prefix || strings.HasPrefix(path, control.Prefix+"/")
}

// servePublishHTTP serves POST /<stream>.
func (s *Server) servePublishHTTP(w http.ResponseWriter, r *http.Request) {
	// A request that arrives while the server starts waits for the start:
	// answering it "stopping" would be untrue.
	if !s.awaitStart(r.Context()) {
		return
	}
	if s.state.Load() != stateReady || !s.track() {
		w.Header().Set("Retry-After", "1")
		httpReply(w, http.StatusServiceUnavailable, []byte(wire.GoingAwayReason(wire.WhyServerStopping)))
		return
	}
	defer s.untrack()
	q, err := wire.ParseRequest(r.URL.Path, r.URL.RawQuery)
	if err == nil && (q.Offset != wire.Null || q.Where != nil || q.Publisher != "") {
		err = &wire.BadRequest{Detail: "a POST publishes the body's rows and takes no offset, where or publisher in its URL; " +
			"an exactly-once publisher sends its id and seq in the " + wire.PublisherHeader + " and " + wire.SeqHeader + " headers"}
	}
	if err != nil {
		var br *wire.BadRequest
		if !errors.As(err, &br) {
			br = &wire.BadRequest{Detail: err.Error()}
		}
		httpReply(w, http.StatusBadRequest, []byte(br.Reason()))
		return
	}
	acc := auth.AccessOf(r)
	if !acc.Allows(config.ActionPublish, q.Stream) {
		// As the gate answers a WebSocket publisher: 401 or 403, before
		// the stream is looked up, so a refusal tells nothing of it.
		s.gate.Refuse(w, acc, fmt.Sprintf("%s stream %q", config.ActionPublish, q.Stream))
		return
	}
	rw := w // net/http's own: MaxBytesReader closes the connection through it
	if s.accessLog.Load() {
		aw := &accessWriter{ResponseWriter: w}
		w = aw
		defer s.logPublishAccess(aw, r, acc.Who, q.Stream, time.Now())
	}
	id, seq, herr := publishHeaders(r)
	if herr != "" {
		httpReply(w, http.StatusBadRequest, wire.AppendErrorReply(nil, wire.ReplyBadFrame, herr))
		return
	}
	st := s.reg.Get(q.Stream)
	switch {
	case st == nil && (s.isHeld(q.Stream) || s.reg.Get(q.Stream) != nil) && acc.Allows(config.ActionRead, q.Stream):
		// Between the stop and the start of a retirement (see serveConn).
		w.Header().Set("Retry-After", "1")
		httpReply(w, http.StatusServiceUnavailable, []byte(wire.GoingAwayReason(wire.WhyStreamRetiring)))
		return
	case st == nil:
		refuseHTTP(w, http.StatusNotFound, &wire.StreamNotFound{Serves: acc.Filter(config.ActionRead, s.reg.Names())})
		return
	}
	ndjson, ok := publishType(r.Header.Get("Content-Type"))
	if !ok {
		httpReply(w, http.StatusUnsupportedMediaType, wire.AppendErrorReply(nil, wire.ReplyUnsupportedType, fmt.Sprintf(
			"the body's Content-Type is %q; send rows as %s (one row, or an array of rows) or %s (one row per line)",
			r.Header.Get("Content-Type"), wire.ContentTypeJSON, wire.ContentTypeNDJSON)))
		return
	}
	if id == "" && seq != 0 {
		httpReply(w, http.StatusBadRequest, wire.AppendErrorReply(nil, wire.ReplyBadFrame, wire.SeqHeader+" is given without "+wire.PublisherHeader+
			"; an exactly-once request sends both, a plain one neither"))
		return
	}
	// Read before the hold: a slow client must not hold up a migration.
	body, status, reply := readPublishBody(rw, r, st.limits.MaxMessageBytes)
	if reply != nil {
		httpReply(w, status, reply)
		return
	}

	// What the request reads of st (its schema, log, marks, retirement) is
	// read under the hold; a migration that swaps them afterwards fences
	// the request through the generation, as it fences a WebSocket
	// publisher.
	release := st.hold()
	defer release()
	switch {
	case st.relay != nil:
		refuseHTTP(w, http.StatusMisdirectedRequest, &wire.RelayOnly{Upstream: st.relay.URL()})
		return
	case st.retirement() != nil:
		rt := st.retirement()
		refuseHTTP(w, http.StatusGone, &wire.StreamRetired{At: rt.At, EndOffset: rt.EndOffset})
		return
	case id != "" && !st.cfg.ExactlyOnce:
		refuseHTTP(w, http.StatusPreconditionFailed, &wire.ExactlyOnceUnavailable{Why: "stream"})
		return
	case len(trimSpace(body)) == 0:
		httpReply(w, http.StatusOK, framePayload(s.httpGreeting(st, id)))
		return
	case id != "" && seq == 0:
		httpReply(w, http.StatusBadRequest, wire.AppendErrorReply(nil, wire.ReplyBadFrame, "the request names publisher "+strconv.Quote(id)+
			" but no "+wire.SeqHeader+"; send the seq of the body's first row (the greeting's last_seq + 1 to go on)"))
		return
	}
	gen := st.life.Generation()
	dec := pubDecoder{Schema: st.sch}
	release()

	j := &job{done: make(chan []byte, 1)}
	if st.m != nil {
		j.read = time.Now()
	}
	var code, detail string
	if ndjson {
		j.rows, j.arena, code, detail = dec.decodeLines(nil, nil, body)
	} else {
		j.rows, j.arena, code, detail = dec.decode(nil, nil, body)
		if code != "" {
			if msg := syntaxError(body); msg != "" {
				code, detail = wire.ReplyBadFrame, msg
			}
		}
	}
	if code != "" {
		httpReply(w, replyStatus(code), wire.AppendErrorReply(nil, code, detail))
		return
	}
	if max := st.limits.MaxInbound; max > 0 && len(j.rows) > max {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{
			"error": wire.ReplyTooManyRows, "rows": len(j.rows), "max_inbound": max,
			"detail": fmt.Sprintf("the body holds %d rows, over limits.max_inbound %d; send them in requests of at most %d rows", len(j.rows), max, max),
		})
		return
	}
	if !st.life.AddReader(gen) {
		w.Header().Set("Retry-After", "1")
		httpReply(w, http.StatusServiceUnavailable, []byte(st.life.GoingAway()))
		return
	}
	answer, status := s.publishHTTP(st, j, id, seq)
	if aw, ok := w.(*accessWriter); ok && status == http.StatusOK && !bytes.Contains(answer, []byte(`"duplicate":true`)) {
		aw.rows = len(j.rows) // those appended: an overlap's repeated rows were trimmed
	}
	httpReply(w, status, answer)
}

// accessWriter keeps what the access log says of an HTTP publish.
type accessWriter struct {
	http.ResponseWriter
	status int
	rows   int
}

func (a *accessWriter) WriteHeader(status int) {
	a.status = status
	a.ResponseWriter.WriteHeader(status)
}

// logPublishAccess logs the access log's line for an HTTP publish: a
// WebSocket connection's line, with the answer's status for the close
// code.
func (s *Server) logPublishAccess(a *accessWriter, r *http.Request, user, stream string, began time.Time) {
	took := math.Round(time.Since(began).Seconds()*1e3) / 1e3
	s.logger.Info("publish request served", "remote", r.RemoteAddr, "user", user, "stream", stream,
		"role", "http_publisher", "status", a.status, "rows", a.rows, "duration_s", took)
}

// publishHTTP queues j's rows on st (a reader of st: it calls
// ReaderDone) and returns the answer once they are committed.
func (s *Server) publishHTTP(st *stream, j *job, id string, seq int64) ([]byte, int) {
	if st.log == nil {
		// Live-only: delivered at once, as a WebSocket publisher's rows.
		defer st.life.ReaderDone()
		ts := s.opts.Clock.Now().UnixMicro()
		if st.m != nil {
			st.m.RowsCommitted.Add(int64(len(j.rows)))
		}
		st.deliverStamped(st.encodeIfWatched(j.rows, wire.Null, ts), j.rows, wire.Null, wire.Null, ts)
		if st.m != nil {
			st.m.AckLatency.Observe(time.Since(j.read))
		}
		return wire.AppendOK(nil, wire.Null, len(j.rows)), http.StatusOK
	}
	if id != "" {
		h := st.marks.TryClaim(id)
		if h == nil {
			st.life.ReaderDone()
			return busyReply(id), http.StatusConflict
		}
		defer st.marks.Release(h)
		if _, ok := st.marks.Settle(h); !ok {
			st.life.ReaderDone()
			return busyReply(id), http.StatusConflict
		}
		v, queue, a := st.marks.Judge(h, &j.eo, seq, j.rows)
		switch v {
		case Reply:
			st.life.ReaderDone()
			p := framePayload(answerFrame(a))
			return p, answerStatus(p)
		case Drop:
			st.life.ReaderDone()
			return busyReply(id), http.StatusConflict
		}
		j.rows = queue
	}
	ok := st.inbox.Put(j, len(j.rows))
	st.life.ReaderDone()
	if !ok {
		if j.eo.Marked() {
			st.marks.Unqueue(j)
		}
		return wire.AppendErrorReply(nil, wire.ReplyCommitFailed, "the server is stopping this stream; nothing was committed, so sending these rows again is safe"), http.StatusServiceUnavailable
	}
	// Never given up on: the rows are queued and will be committed or
	// failed whether or not the client still waits, and an exactly-once
	// hold must last until they are.
	p := framePayload(<-j.done)
	return p, answerStatus(p)
}

// httpGreeting is the greeting frame a WebSocket publisher of st (with
// exactly-once id, when not "") would get, with the id's committed mark.
func (s *Server) httpGreeting(st *stream, id string) []byte {
	end := wire.Null
	if st.cfg.Durable {
		end = st.endOffset.Load()
	}
	var mark *wire.PublisherMark
	if id != "" && st.marks != nil {
		mark = &wire.PublisherMark{ID: id, LastOffset: wire.Null}
		if ms, ok := st.marks.State(id); ok {
			mark.LastSeq, mark.LastOffset = ms.LastSeq, ms.LastOffset
		}
	}
	return st.greetingWith(end, nil, nil, mark)
}

// publishHeaders reads an exactly-once request's id and seq (seq 0 when
// absent); a bad one is described in msg.
func publishHeaders(r *http.Request) (id string, seq int64, msg string) {
	id = r.Header.Get(wire.PublisherHeader)
	if _, given := r.Header[http.CanonicalHeaderKey(wire.PublisherHeader)]; given && (id == "" || len(id) > wire.MaxPublisherBytes || !utf8.ValidString(id)) {
		return "", 0, fmt.Sprintf("%s is %d bytes; give 1 to %d bytes of UTF-8 text", wire.PublisherHeader, len(id), wire.MaxPublisherBytes)
	}
	if v := r.Header.Get(wire.SeqHeader); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return "", 0, fmt.Sprintf("%s %.30q is not a whole number ≥ 1 (a fresh publisher id starts at 1; go on from the greeting's last_seq + 1)", wire.SeqHeader, v)
		}
		if n > 1<<62 {
			return "", 0, fmt.Sprintf("%s %d is too large; seqs stay below 2^62", wire.SeqHeader, n)
		}
		seq = n
	}
	return id, seq, ""
}

// publishType reads a publish body's Content-Type: JSON (ndjson false) or
// NDJSON; ok is false for anything else.
func publishType(ct string) (ndjson, ok bool) {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false, false
	}
	switch mt {
	case wire.ContentTypeJSON:
		return false, true
	case wire.ContentTypeNDJSON, "application/jsonl", "application/x-jsonlines":
		return true, true
	}
	return false, false
}

// readPublishBody reads r's body, at most limit bytes (max_message_bytes,
// the bound of a WebSocket publish frame). A body over it is answered 413
// without being read past the limit.
func readPublishBody(w http.ResponseWriter, r *http.Request, limit int) ([]byte, int, []byte) {
	tooBig := func() []byte {
		b, _ := json.Marshal(map[string]any{
			"error": wire.ReplyTooBig, "max_message_bytes": limit,
			"detail": fmt.Sprintf("the body is over limits.max_message_bytes (%d bytes); send fewer rows per request", limit),
		})
		return b
	}
	if r.ContentLength > int64(limit) {
		return nil, http.StatusRequestEntityTooLarge, tooBig()
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, int64(limit)))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, http.StatusRequestEntityTooLarge, tooBig()
	case err != nil:
		return nil, http.StatusBadRequest, wire.AppendErrorReply(nil, wire.ReplyBadFrame, "reading the body failed: "+err.Error())
	}
	return buf.Bytes(), 0, nil
}

// decodeLines decodes an NDJSON body, one row per line (blank lines
// skipped), as decode decodes a batch frame: every row is checked, and the
// first refused one is named by its index in the batch and its line.
func (d *pubDecoder) decodeLines(rows [][]byte, arena, data []byte) ([][]byte, []byte, string, string) {
	var ends []int
	for line := 1; len(data) > 0; line++ {
		l := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		l = trimSpace(l)
		if len(l) == 0 {
			continue
		}
		i := len(ends)
		if l[0] != '{' {
			return nil, arena, wire.ReplyBadFrame, fmt.Sprintf("row %d (line %d) of the batch is %s, not a row (a JSON object); nothing in the batch was committed", i, line, jsonKind(l[0]))
		}
		if err := d.Schema.Decode(&d.row, l); err != nil {
			return nil, arena, rowErrorCode(err, l), fmt.Sprintf("row %d (line %d) of the batch: %s; nothing in the batch was committed", i, line, rowErrorDetail(-1, err, l))
		}
		arena = append(arena, d.row.Canonical...)
		ends = append(ends, len(arena))
	}
	if len(ends) == 0 {
		return nil, arena, wire.ReplyBadFrame, "the body holds no row; send one JSON object per line"
	}
	start := 0
	for _, end := range ends {
		rows = append(rows, arena[start:end:end])
		start = end
	}
	return rows, arena, "", ""
}

// replyStatus is the HTTP status of a publish reply's error code.
func replyStatus(code string) int {
	switch code {
	case "":
		return http.StatusOK
	case wire.ReplyRejected:
		return http.StatusUnprocessableEntity
	case wire.ReplySequenceGap:
		return http.StatusConflict
	case wire.ReplyCommitFailed:
		return http.StatusServiceUnavailable
	default:
		return http.StatusBadRequest
	}
}

// answerStatus is the HTTP status of a publish reply.
func answerStatus(reply []byte) int {
	if bytes.HasPrefix(reply, []byte(`{"ok":`)) {
		return http.StatusOK
	}
	var r wire.Reply
	if err := wire.ParseReply(reply, &r); err != nil {
		return http.StatusInternalServerError
	}
	return replyStatus(r.Error)
}

// busyReply is the answer to an exactly-once request whose id another
// publisher holds.
func busyReply(id string) []byte {
	return wire.AppendErrorReply(nil, wire.ReplyPublisherBusy, fmt.Sprintf("publisher %q is publishing right now (over a WebSocket or another request); "+
		"nothing was committed — send the request again once it is done, and run one publisher per id", id))
}

// framePayload is the payload of a server-built text frame (a reply or a
// greeting, shorter than 2^63 bytes).
func framePayload(frame []byte) []byte {
	switch n := frame[1] & 0x7f; n {
	case 126:
		return frame[4:]
	case 127:
		return frame[10:]
	default:
		return frame[2:]
	}
}

// refuseHTTP answers a refusal that a WebSocket gets as a close frame, with
// the close's reason as the body.
func refuseHTTP(w http.ResponseWriter, status int, r wire.Refusal) {
	httpReply(w, status, []byte(r.Reason()))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	httpReply(w, status, b)
}

// httpReply writes a JSON answer.
func httpReply(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_, _ = io.WriteString(w, "\n")
}
