package wire

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Field is one key of a close reason. Value is an int, an int64 (Null is
// written as null), a string, a bool, a []string, or nil (null).
type Field struct {
	Key   string
	Value any
}

// minStringBytes is the shortest a string field is cut to before trimming
// drops it instead: a detail cut shorter than this says nothing.
const minStringBytes = 16

// CloseReason encodes a close reason as compact JSON, {"error":name, fields…}
// in the order given (most useful first), and trims it to MaxReasonBytes:
// while too long, the last field is shortened if it is a list (names dropped
// from its end) or a long string (cut, marked with "…"), else dropped. The
// {"error":name} core always remains.
func CloseReason(name string, fields ...Field) string {
	fs := append([]Field(nil), fields...)
	fits := func() bool { return len(encodeReason(name, fs)) <= MaxReasonBytes }
	for !fits() {
		if len(fs) == 0 {
			// Only an absurdly long error name gets here; cut it so the
			// reason still fits the control frame.
			full := name
			n := largest(len(full), func(n int) bool { name = cutString(full, n); return fits() })
			name = cutString(full, n)
			break
		}
		last := &fs[len(fs)-1]
		switch v := last.Value.(type) {
		case []string:
			// The longest prefix of the list that fits, if any does.
			k := largest(len(v)-1, func(k int) bool { last.Value = v[:k]; return fits() })
			last.Value = v[:k]
			if fits() {
				return string(encodeReason(name, fs))
			}
		case string:
			n := largest(len(v)-1, func(n int) bool { last.Value = cutString(v, n) + "…"; return fits() })
			if n >= minStringBytes {
				last.Value = cutString(v, n) + "…"
				return string(encodeReason(name, fs))
			}
		}
		fs = fs[:len(fs)-1]
	}
	return string(encodeReason(name, fs))
}

// largest returns the largest n in [0, hi] with ok(n), assuming ok is
// monotone (true up to some point), or 0 when none is.
func largest(hi int, ok func(int) bool) int {
	lo := 0 // invariant: the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// cutString returns at most n bytes of s, cut on a rune boundary.
func cutString(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func encodeReason(name string, fs []Field) []byte {
	b := make([]byte, 0, 128)
	b = append(b, `{"error":`...)
	b = AppendString(b, name)
	for _, f := range fs {
		b = append(b, ',')
		b = AppendString(b, f.Key)
		b = append(b, ':')
		switch v := f.Value.(type) {
		case nil:
			b = append(b, "null"...)
		case int:
			b = appendIntOrNull(b, int64(v))
		case int64:
			b = appendIntOrNull(b, v)
		case bool:
			b = strconv.AppendBool(b, v)
		case string:
			b = AppendString(b, v)
		case []string:
			b = append(b, '[')
			for i, s := range v {
				if i > 0 {
					b = append(b, ',')
				}
				b = AppendString(b, s)
			}
			b = append(b, ']')
		default:
			j, err := json.Marshal(v)
			if err != nil {
				j = []byte("null")
			}
			b = append(b, j...)
		}
	}
	return append(b, '}')
}

// Reason is a parsed close reason: its "error" name and its other fields.
// Accessors return Null, "" or nil for a field that is absent or of the wrong
// type, so a trimmed or foreign reason still yields what it carries.
type Reason struct {
	Error  string
	Fields map[string]json.RawMessage
}

// ParseReason reads a close reason. It never fails: text that is not a JSON
// object (a proxy's reason, an empty one) gives an empty Reason.
func ParseReason(reason string) Reason {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(reason), &m) != nil || m == nil {
		return Reason{}
	}
	r := Reason{Fields: m}
	if raw, ok := m["error"]; ok {
		_ = json.Unmarshal(raw, &r.Error)
		delete(m, "error")
	}
	return r
}

// Int returns the integer field key, or Null.
func (r Reason) Int(key string) int64 {
	raw, ok := r.Fields[key]
	if !ok || firstByte(raw) == 'n' {
		return Null
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil {
		return Null
	}
	return n
}

// String returns the string field key, or "".
func (r Reason) String(key string) string {
	var s string
	if raw, ok := r.Fields[key]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// Strings returns the list-of-strings field key, or nil.
func (r Reason) Strings(key string) []string {
	var s []string
	if raw, ok := r.Fields[key]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return nil
}

// Has reports whether the reason carries key.
func (r Reason) Has(key string) bool {
	_, ok := r.Fields[key]
	return ok
}

// ParseClose maps a close frame to the typed error of its code, filled from
// the reason's fields (a field the reason lacks is Null or ""). It returns nil
// for 1000 and a *CloseError for a code this package does not know. Dispatch
// is on the code; the reason only supplies numbers.
func ParseClose(code int, reason string) error {
	r := ParseReason(reason)
	switch code {
	case CloseNormal:
		return nil
	case CloseGoingAway:
		return &GoingAway{Why: r.String("why"), Reason: reason, Offset: Null}
	case CloseTooBig:
		return &TooBig{Reason: reason}
	case CloseBadRequest:
		d := r.String("detail")
		if d == "" && r.Error == "" {
			d = reason
		}
		return &BadRequest{Detail: d}
	case CloseNoSuchStream:
		omitted := r.Int("omitted")
		if omitted == Null {
			omitted = 0
		}
		return &StreamNotFound{Serves: r.Strings("serves"), Omitted: int(omitted)}
	case CloseSuperseded:
		return &Superseded{Publisher: r.String("publisher")}
	case CloseRetired:
		return &StreamRetired{At: r.Int("at"), EndOffset: r.Int("end_offset")}
	case CloseExactlyOnceUnavailable:
		return &ExactlyOnceUnavailable{Why: r.String("why")}
	case CloseNotReplayable:
		return &NotReplayable{
			Why:       r.String("why"),
			Offset:    r.Int("offset"),
			Earliest:  r.Int("earliest"),
			EndOffset: r.Int("end_offset"),
			MaxReplay: r.Int("max_replay"),
		}
	case CloseRelay:
		return &RelayOnly{Upstream: r.String("upstream")}
	case CloseTooSlow:
		return &TooSlow{Offset: r.Int("offset"), Behind: r.Int("behind")}
	default:
		return &CloseError{Code: code, Reason: reason}
	}
}
