package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// pubDecoder decodes one connection's publish frames against its stream's
// schema. It reuses one row across frames, so a pubDecoder belongs to one
// goroutine (the connection's reader).
type pubDecoder struct {
	Schema *schema.Schema
	row    schema.Row // reused across frames
}

// readPubMessage reads one message into buf (reused), reporting tooBig when it
// exceeds limit bytes (the rest is left for gorilla to skip).
func readPubMessage(r io.Reader, buf []byte, limit int) ([]byte, bool, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return buf[:0], true, nil
			}
			n := 2*cap(buf) + 512
			if n > limit+1 {
				n = limit + 1
			}
			if n <= cap(buf) {
				n = cap(buf) + 1
			}
			nb := make([]byte, len(buf), n)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return buf[:0], true, nil
		}
		if err == io.EOF {
			return buf, false, nil
		}
		if err != nil {
			return buf[:0], false, err
		}
	}
}

// hasSeq reports whether a frame looks like an exactly-once frame: a list
// whose first element is a number.
func hasSeq(data []byte) bool {
	b := trimSpace(data)
	if len(b) < 2 || b[0] != '[' {
		return false
	}
	b = trimSpace(b[1:])
	return len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9'))
}

// Decode decodes a publish frame: [seq, row] or [seq, [rows…]] from an
// exactly-once publisher, else a row or a list of rows. On failure it
// returns the reply's error code and detail. Whether the frame is valid JSON
// at all is asked only then, so a valid frame is parsed once; a frame that
// is not is a bad_frame saying where it stops being JSON.
func (d *pubDecoder) Decode(rows [][]byte, data []byte, exactlyOnce bool) (seq int64, _ [][]byte, code, detail string) {
	seq, rows, _, code, detail = d.DecodeTo(rows, nil, data, exactlyOnce)
	return seq, rows, code, detail
}

// DecodeTo is Decode storing the canonical rows in arena (appended to,
// and returned grown) rather than in storage of their own, so a caller
// that reuses arena once it is done with a frame's rows decodes without
// allocating.
func (d *pubDecoder) DecodeTo(rows [][]byte, arena []byte, data []byte, exactlyOnce bool) (seq int64, _ [][]byte, _ []byte, code, detail string) {
	if exactlyOnce {
		seq, rows, arena, code, detail = d.decodeSeq(rows, arena, data)
	} else {
		rows, arena, code, detail = d.decode(rows, arena, data)
	}
	if code == "" {
		return seq, rows, arena, "", ""
	}
	switch msg := syntaxError(data); {
	case msg != "":
		detail = msg
		code = wire.ReplyBadFrame
	case !exactlyOnce && code == wire.ReplyBadFrame && hasSeq(data):
		detail = "publish frame starts with a number, like an exactly-once [seq, row] frame, but this connection " +
			"has no publisher id; send the row(s) without a seq, or connect with &publisher=ID to a stream with exactly_once: true"
	}
	return 0, nil, arena, code, detail
}

// decode splits and validates a publish frame into canonical rows, stored
// in arena (one allocation holds them all when arena has no room). On
// failure it returns the reply's error code and detail.
func (d *pubDecoder) decode(rows [][]byte, arena, data []byte) ([][]byte, []byte, string, string) {
	sch := d.Schema
	b := trimSpace(data)
	if len(b) == 0 {
		return nil, arena, wire.ReplyBadFrame, "publish frame is empty; send a row (a JSON object) or a list of rows"
	}
	switch b[0] {
	case '{':
		if err := sch.Decode(&d.row, b); err != nil {
			return nil, arena, rowErrorCode(err, b), rowErrorDetail(-1, err, b)
		}
		start := len(arena)
		arena = append(arena, d.row.Canonical...)
		return append(rows, arena[start:len(arena):len(arena)]), arena, "", ""
	case '[':
		elems, err := splitArray(b)
		if err != nil {
			return nil, arena, wire.ReplyBadFrame, "publish frame is not JSON: " + err.Error()
		}
		if len(elems) == 0 {
			return nil, arena, wire.ReplyBadFrame, "publish frame is an empty list; send a row or a list of rows"
		}
		base := len(arena)
		ends := make([]int, 0, len(elems))
		for i, e := range elems {
			if e[0] != '{' {
				return nil, arena[:base], wire.ReplyBadFrame, fmt.Sprintf("publish frame holds %s at position %d, not a row (a JSON object)", jsonKind(e[0]), i)
			}
			if err := sch.Decode(&d.row, e); err != nil {
				return nil, arena[:base], rowErrorCode(err, e), rowErrorDetail(i, err, e)
			}
			if i == 0 && cap(arena)-len(arena) < len(d.row.Canonical)*len(elems) {
				// Room for rows of about this size, in one allocation.
				grown := make([]byte, len(arena), len(arena)+len(d.row.Canonical)*len(elems)+64)
				copy(grown, arena)
				arena = grown
			}
			arena = append(arena, d.row.Canonical...)
			ends = append(ends, len(arena))
		}
		// Sliced only now: the rows then share arena's final storage.
		start := base
		for _, end := range ends {
			rows = append(rows, arena[start:end:end])
			start = end
		}
		return rows, arena, "", ""
	default:
		return nil, arena, wire.ReplyBadFrame, fmt.Sprintf("publish frame is %s, not a row (a JSON object) or a list of rows", jsonKind(b[0]))
	}
}

// syntaxError says where data stops being valid JSON, with the byte
// position, or "" when it is valid JSON. JSON that encoding/json gives up
// on for its nesting (past 10,000 levels) counts as valid here: it is, and
// the decoder's answer (nested deeper than the schema package reads, with
// the limit) is the one that helps.
func syntaxError(data []byte) string {
	err := json.Unmarshal(data, new(json.RawMessage))
	if err == nil {
		return ""
	}
	var se *json.SyntaxError
	if errors.As(err, &se) && strings.HasSuffix(se.Error(), "exceeded max depth") {
		return ""
	}
	if errors.As(err, &se) {
		return fmt.Sprintf(notJSONPrefix+"%s at byte %d of %d; send a row (a JSON object) or a list of rows", se, se.Offset, len(data))
	}
	return notJSONPrefix + err.Error()
}

// notJSONPrefix starts the detail of a frame that is not valid JSON.
const notJSONPrefix = "publish frame is not valid JSON: "

// rowErrorCode maps a decode error: a row the schema refuses is "rejected";
// a row that is not JSON at all is "bad_frame" (checked only on this error
// path, so valid rows are parsed once).
func rowErrorCode(err error, row []byte) string {
	var re *schema.RowError
	if errors.As(err, &re) && syntaxError(row) == "" {
		return wire.ReplyRejected
	}
	return wire.ReplyBadFrame
}

func rowErrorDetail(i int, err error, row []byte) string {
	msg := err.Error()
	if rowErrorCode(err, row) == wire.ReplyBadFrame {
		msg = "publish frame is not JSON: " + msg
	}
	if i >= 0 {
		return "row " + strconv.Itoa(i) + " of the batch: " + msg + "; nothing in the batch was committed"
	}
	return msg
}

// jsonKind names the JSON value starting with c, for a person.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return "a number"
		}
		return "something that is not JSON"
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// splitArray returns the top-level elements of the JSON array b (trimmed).
// It checks structure only (brackets, strings); each element is validated by
// the schema.
func splitArray(b []byte) ([][]byte, error) {
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, errors.New("a list must start with [ and end with ]")
	}
	inner := b[1 : len(b)-1]
	var elems [][]byte
	depth := 0
	start := 0
	inStr := false
	for i := 0; i < len(inner); i++ {
		ch := inner[i]
		if inStr {
			switch ch {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch ch {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced %q at byte %d", ch, i+1)
			}
		case ',':
			if depth == 0 {
				e := trimSpace(inner[start:i])
				if len(e) == 0 {
					return nil, fmt.Errorf("empty element before byte %d", i+1)
				}
				elems = append(elems, e)
				start = i + 1
			}
		}
	}
	if inStr {
		return nil, errors.New("unterminated string")
	}
	if depth != 0 {
		return nil, errors.New("unbalanced brackets")
	}
	e := trimSpace(inner[start:])
	if len(e) == 0 {
		if len(elems) > 0 {
			return nil, errors.New("trailing comma")
		}
		return nil, nil
	}
	return append(elems, e), nil
}

// decodeSeq splits an exactly-once frame, [seq, row] or [seq, [rows…]], and
// validates its rows. On failure it returns the reply's error code and detail.
func (d *pubDecoder) decodeSeq(rows [][]byte, arena, data []byte) (int64, [][]byte, []byte, string, string) {
	const shape = "a publisher with an id sends [seq, row] or [seq, [rows…]], seq being the number of the frame's first row"
	b := trimSpace(data)
	if len(b) == 0 {
		return 0, nil, arena, wire.ReplyBadFrame, "publish frame is empty; " + shape
	}
	if b[0] != '[' {
		return 0, nil, arena, wire.ReplyBadFrame, "publish frame is " + jsonKind(b[0]) + " without a seq; " + shape
	}
	elems, err := splitArray(b)
	if err != nil {
		return 0, nil, arena, wire.ReplyBadFrame, "publish frame is not JSON: " + err.Error()
	}
	if len(elems) == 0 || elems[0][0] == '{' || elems[0][0] == '[' {
		return 0, nil, arena, wire.ReplyBadFrame, "publish frame has no seq; " + shape
	}
	if len(elems) != 2 {
		return 0, nil, arena, wire.ReplyBadFrame, fmt.Sprintf("publish frame has %d elements; %s", len(elems), shape)
	}
	seq, err := strconv.ParseInt(string(elems[0]), 10, 64)
	if err != nil || seq < 1 {
		return 0, nil, arena, wire.ReplyBadFrame, fmt.Sprintf("seq %.30s is not a whole number ≥ 1 (a fresh publisher id starts at 1; resume from the greeting's last_seq + 1)", elems[0])
	}
	rows, arena, code, detail := d.decode(rows, arena, elems[1])
	if code != "" {
		return 0, nil, arena, code, detail
	}
	if seq > 1<<62-int64(len(rows)) {
		return 0, nil, arena, wire.ReplyBadFrame, fmt.Sprintf("seq %d is too large; seqs stay below 2^62", seq)
	}
	return seq, rows, arena, "", ""
}
