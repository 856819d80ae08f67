package jsontext

import (
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// hexDigits are the digits of a \u00xx escape and of a control
// character named in a message.
const hexDigits = "0123456789abcdef"

// UnsafeString views b as a string without copying. The result must not
// outlive b or be retained (strconv.Parse* do not retain their argument).
func UnsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// UnsafeBytes views s as a byte slice without copying; never written to.
func UnsafeBytes(s string) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// IsDigit reports whether c is an ASCII digit.
func IsDigit(c byte) bool { return c >= '0' && c <= '9' }

// SkipWS returns the first position at or after pos that is not JSON
// whitespace.
func SkipWS(data []byte, pos int) int {
	for pos < len(data) && isSpace(data[pos]) {
		pos++
	}
	return pos
}

// HasLit reports whether data[pos:] starts with lit.
func HasLit(data []byte, pos int, lit string) bool {
	return len(data)-pos >= len(lit) && string(data[pos:pos+len(lit)]) == lit
}

// AppendString writes s as a canonical JSON string: only '"', '\\' and
// control characters are escaped (\b \f \n \r \t, others as \u00xx), nothing
// is HTML-escaped, and valid UTF-8 is kept as is. Invalid UTF-8 (which Decode
// refuses, but a foreign Arrow file may hold) is written as U+FFFD.
func AppendString(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// ScanNumber checks the JSON number grammar from pos. It returns the end of
// the token, whether it is a plain integer (no fraction, no exponent) and
// whether it is well formed.
func ScanNumber(data []byte, pos int) (end int, plain, ok bool) {
	i := pos
	if i < len(data) && data[i] == '-' {
		i++
	}
	if i >= len(data) {
		return i, false, false
	}
	switch c := data[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i++
		for i < len(data) && IsDigit(data[i]) {
			i++
		}
	default:
		return i, false, false
	}
	plain = true
	if i < len(data) && data[i] == '.' {
		plain = false
		i++
		s := i
		for i < len(data) && IsDigit(data[i]) {
			i++
		}
		if i == s {
			return i, false, false
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		plain = false
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		s := i
		for i < len(data) && IsDigit(data[i]) {
			i++
		}
		if i == s {
			return i, false, false
		}
	}
	return i, plain, true
}

// IntProblem says why a number token is not an int64.
type IntProblem uint8

// The answers of ExactInt.
const (
	IntOK       IntProblem = iota // an exact int64
	IntFraction                   // the value is not integral
	IntRange                      // integral, but outside int64
)

// ParsePlainInt parses a well-formed plain integer token of at most 18
// digits, which cannot overflow.
func ParsePlainInt(tok []byte) int64 {
	neg := tok[0] == '-'
	i := 0
	if neg {
		i = 1
	}
	var v int64
	for ; i < len(tok); i++ {
		v = v*10 + int64(tok[i]-'0')
	}
	if neg {
		return -v
	}
	return v
}

// ExactInt parses a well-formed JSON number token as an exact int64. Like
// JSON Schema's "integer", it accepts any number whose value is integral
// (1.0, 1e3, 12.5e1) and refuses fractions (1.5, 1e-3) and values outside
// int64; the digits are examined exactly, never through a float.
func ExactInt(tok []byte) (int64, IntProblem) {
	if len(tok) > 0 && len(tok) <= 18 {
		plain := true
		for _, c := range tok {
			if c == '.' || c == 'e' || c == 'E' {
				plain = false
				break
			}
		}
		if plain {
			return ParsePlainInt(tok), IntOK
		}
	}
	i := 0
	neg := false
	if i < len(tok) && tok[i] == '-' {
		neg = true
		i++
	}
	intStart := i
	for i < len(tok) && IsDigit(tok[i]) {
		i++
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(tok) && tok[i] == '.' {
		i++
		fracStart = i
		for i < len(tok) && IsDigit(tok[i]) {
			i++
		}
		fracEnd = i
	}
	exp := 0
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		eneg := false
		if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
			eneg = tok[i] == '-'
			i++
		}
		for ; i < len(tok); i++ {
			if exp < 1_000_000 {
				exp = exp*10 + int(tok[i]-'0')
			}
		}
		if eneg {
			exp = -exp
		}
	}
	nInt := intEnd - intStart
	n := nInt + fracEnd - fracStart
	digit := func(k int) byte {
		if k < nInt {
			return tok[intStart+k]
		}
		return tok[fracStart+k-nInt]
	}
	first, last := -1, -1
	for k := 0; k < n; k++ {
		if digit(k) != '0' {
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	if first < 0 {
		return 0, IntOK
	}
	// The last significant digit has weight 10^e.
	e := nInt - 1 - last + exp
	if e < 0 {
		return 0, IntFraction
	}
	if last-first+1+e > 19 {
		return 0, IntRange
	}
	var u uint64
	for k := first; k <= last; k++ {
		u = u*10 + uint64(digit(k)-'0')
	}
	for ; e > 0; e-- {
		u *= 10
	}
	if neg {
		if u > 1<<63 {
			return 0, IntRange
		}
		return -int64(u), IntOK
	}
	if u > math.MaxInt64 {
		return 0, IntRange
	}
	return int64(u), IntOK
}

// ScanSimpleString scans a JSON string starting at the quote at pos. If it
// holds only Printable ASCII without escapes it returns the index after the
// closing quote and true; otherwise false (the caller takes the slow path).
func ScanSimpleString(data []byte, pos int) (int, bool) {
	for i := pos + 1; i < len(data); i++ {
		c := data[i]
		if c == '"' {
			return i + 1, true
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return 0, false
		}
	}
	return 0, false
}

// Unhex returns the value of the hex digit c (either case); false when c
// is not one.
func Unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// DecodeString decodes the JSON string starting at the quote at pos,
// appending its text to buf. It refuses what JSON or UTF-8 forbid: raw
// control characters, bad escapes, lone surrogates and invalid UTF-8. It
// returns the index after the closing quote; problem is "" on success.
func DecodeString(data []byte, pos int, buf []byte) (out []byte, end int, problem string) {
	return scanString(data, pos, buf, true)
}

// scanString is DecodeString; with keep false it only validates and
// appends nothing.
func scanString(data []byte, pos int, buf []byte, keep bool) (out []byte, end int, problem string) {
	i := pos + 1
	start := i
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			if keep {
				buf = append(buf, data[start:i]...)
			}
			return buf, i + 1, ""
		case c == '\\':
			if keep {
				buf = append(buf, data[start:i]...)
			}
			if i+1 >= len(data) {
				return buf, i, "unterminated string"
			}
			switch e := data[i+1]; e {
			case '"', '\\', '/':
				if keep {
					buf = append(buf, e)
				}
				i += 2
			case 'b':
				if keep {
					buf = append(buf, '\b')
				}
				i += 2
			case 'f':
				if keep {
					buf = append(buf, '\f')
				}
				i += 2
			case 'n':
				if keep {
					buf = append(buf, '\n')
				}
				i += 2
			case 'r':
				if keep {
					buf = append(buf, '\r')
				}
				i += 2
			case 't':
				if keep {
					buf = append(buf, '\t')
				}
				i += 2
			case 'u':
				r, ok := hex4(data, i+2)
				if !ok {
					return buf, i, "invalid \\u escape in a string"
				}
				i += 6
				if r >= 0xD800 && r < 0xDC00 {
					r2, ok := rune(0), false
					if i+1 < len(data) && data[i] == '\\' && data[i+1] == 'u' {
						r2, ok = hex4(data, i+2)
					}
					if !ok || r2 < 0xDC00 || r2 >= 0xE000 {
						return buf, i, "a string holds a lone UTF-16 surrogate (\\u" + string(data[i-4:i]) + "), which is not a character"
					}
					i += 6
					r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
				} else if r >= 0xDC00 && r < 0xE000 {
					return buf, i, "a string holds a lone UTF-16 surrogate (\\u" + string(data[i-4:i]) + "), which is not a character"
				}
				if keep {
					buf = utf8.AppendRune(buf, r)
				}
			default:
				return buf, i, "invalid escape \\" + Printable(e) + " in a string"
			}
			start = i
		case c < 0x20:
			return buf, i, "a string holds a raw control character (byte 0x" + string([]byte{hexDigits[c>>4], hexDigits[c&0xF]}) + "); JSON requires it escaped"
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return buf, i, "a string holds invalid UTF-8"
			}
			i += size
		}
	}
	return buf, i, "unterminated string"
}

func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for k := 0; k < 4; k++ {
		v, ok := Unhex(data[i+k])
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// Printable names byte c for a message: the character when it prints, its
// hex otherwise.
func Printable(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return string(rune(c))
	}
	return "x" + string([]byte{hexDigits[c>>4], hexDigits[c&0xF]})
}

// SkipValue checks that data[pos:] starts with one well-formed JSON value
// (strings valid UTF-8, nesting at most MaxDepth) and returns its end.
func SkipValue(data []byte, pos int, depth int) (int, string) {
	if pos >= len(data) {
		return pos, "unexpected end of input, expected a value"
	}
	switch c := data[pos]; {
	case c == '"':
		if end, ok := ScanSimpleString(data, pos); ok {
			return end, ""
		}
		return skipString(data, pos)
	case c == '{':
		if depth >= MaxDepth {
			return pos, TooDeep
		}
		pos = SkipWS(data, pos+1)
		if pos < len(data) && data[pos] == '}' {
			return pos + 1, ""
		}
		for {
			if pos >= len(data) || data[pos] != '"' {
				return pos, "expected a string key" + GotAt(data, pos)
			}
			end, p := skipString(data, pos)
			if p != "" {
				return end, p
			}
			pos = SkipWS(data, end)
			if pos >= len(data) || data[pos] != ':' {
				return pos, "expected ':' after a key" + GotAt(data, pos)
			}
			pos, p = SkipValue(data, SkipWS(data, pos+1), depth+1)
			if p != "" {
				return pos, p
			}
			pos = SkipWS(data, pos)
			if pos < len(data) && data[pos] == ',' {
				pos = SkipWS(data, pos+1)
				continue
			}
			if pos < len(data) && data[pos] == '}' {
				return pos + 1, ""
			}
			return pos, "expected ',' or '}' in an object" + GotAt(data, pos)
		}
	case c == '[':
		if depth >= MaxDepth {
			return pos, TooDeep
		}
		pos = SkipWS(data, pos+1)
		if pos < len(data) && data[pos] == ']' {
			return pos + 1, ""
		}
		for {
			var p string
			pos, p = SkipValue(data, pos, depth+1)
			if p != "" {
				return pos, p
			}
			pos = SkipWS(data, pos)
			if pos < len(data) && data[pos] == ',' {
				pos = SkipWS(data, pos+1)
				continue
			}
			if pos < len(data) && data[pos] == ']' {
				return pos + 1, ""
			}
			return pos, "expected ',' or ']' in an array" + GotAt(data, pos)
		}
	case c == 't':
		if HasLit(data, pos, "true") {
			return pos + 4, ""
		}
	case c == 'f':
		if HasLit(data, pos, "false") {
			return pos + 5, ""
		}
	case c == 'n':
		if HasLit(data, pos, "null") {
			return pos + 4, ""
		}
	case c == '-' || IsDigit(c):
		end, _, ok := ScanNumber(data, pos)
		if ok {
			return end, ""
		}
		return end, "malformed number"
	}
	return pos, "expected a value" + GotAt(data, pos)
}

func skipString(data []byte, pos int) (int, string) {
	_, end, p := scanString(data, pos, nil, false)
	return end, p
}

// MaxDepth bounds the nesting of any JSON this package parses, so hostile
// input cannot exhaust the stack.
const MaxDepth = 512

// TooDeep is the problem of JSON nested deeper than MaxDepth (its number
// kept in step, which TestDeepJSONSaysTheLimit checks). Such JSON may well
// be valid, so it is never worded as "invalid JSON" (Problem).
const TooDeep = "nested deeper than 512 levels, the most this server reads; flatten it"

// Problem words a problem found while reading JSON: "invalid JSON: …",
// except nesting past the limit, which says so and gives the limit.
func Problem(prob string) string {
	if prob == TooDeep {
		return prob
	}
	return "invalid JSON: " + prob
}

// GotAt describes the byte at pos for a syntax error.
func GotAt(data []byte, pos int) string {
	if pos >= len(data) {
		return ", got the end of input"
	}
	return ", got '" + Printable(data[pos]) + "' at byte " + strconv.Itoa(pos)
}

// Describe names the JSON value at data[pos:] for an error message, e.g.
// `a string "abc"` or `a number 1.5`, shortened when long.
func Describe(data []byte, pos int) string {
	if pos >= len(data) {
		return "nothing"
	}
	end, p := SkipValue(data, pos, 0)
	if p != "" || end <= pos {
		end = pos + 1
	}
	text := data[pos:end]
	short := string(text)
	if len(short) > 40 {
		cut := 37
		for cut > 0 && !utf8.RuneStart(short[cut]) {
			cut--
		}
		short = short[:cut] + "..."
	}
	switch c := data[pos]; {
	case c == '"':
		return "a string " + short
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean " + short
	case c == 'n':
		return "null"
	case c == '-' || IsDigit(c):
		return "a number " + short
	}
	return "'" + Printable(data[pos]) + "'"
}
