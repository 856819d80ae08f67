package wire

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxPublisherBytes is the longest exactly-once publisher id.
const MaxPublisherBytes = 128

// Request is what a connection asks for, read from its URL: a subscribe
// (live, or resuming at Offset) or a publish.
type Request struct {
	Stream    string          // path without its leading "/"; "" is the stream at /
	Publish   bool            // ?publish: this connection publishes
	Publisher string          // &publisher=ID: exactly-once publisher id ("" = plain)
	Offset    int64           // ?offset=N: resume inclusive at N (0 = earliest); Null = live from the frontier
	Where     json.RawMessage // ?where=JSON: the filter object as sent; nil when absent
}

// ParseRequest reads a request from a URL path and raw query, refusing with
// a *BadRequest whose Detail says what is wrong: an unknown or repeated
// parameter, publish with offset or where, publisher without publish, a
// negative or non-integer offset, a where that is not a JSON object, a
// publisher id that is empty, longer than MaxPublisherBytes or not UTF-8.
// The filter's columns are the server's to check against the schema.
func ParseRequest(path, rawQuery string) (Request, error) {
	// The name is copied: path may be part of the whole request line,
	// where= and all (net/http slices it so), and a server keeps the name
	// for the connection's life.
	req := Request{Stream: strings.Clone(strings.TrimPrefix(path, "/")), Offset: Null}
	rawQuery, where, cut := cutWhere(rawQuery)
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return req, &BadRequest{Detail: "the query string is not URL-encoded: " + err.Error()}
	}
	var unknown, twice []string
	for k, v := range q {
		switch k {
		case "offset", "where", "publish", "publisher":
			if len(v) > 1 {
				twice = append(twice, k)
			}
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return req, &BadRequest{Detail: "unknown query parameter(s): " + strings.Join(unknown, ", ") + "; use offset, where, publish, publisher"}
	}
	if len(twice) > 0 {
		sort.Strings(twice)
		return req, &BadRequest{Detail: strings.Join(twice, ", ") + " given more than once; pass each once"}
	}
	_, req.Publish = q["publish"]
	if p, ok := q["publisher"]; ok {
		if !req.Publish {
			return req, &BadRequest{Detail: "publisher= needs publish; add &publish to publish exactly once"}
		}
		if p[0] == "" || len(p[0]) > MaxPublisherBytes {
			return req, &BadRequest{Detail: fmt.Sprintf("publisher id is %d bytes; give 1 to %d", len(p[0]), MaxPublisherBytes)}
		}
		if !utf8.ValidString(p[0]) {
			return req, &BadRequest{Detail: "publisher id is not valid UTF-8; give 1 to 128 bytes of UTF-8 text"}
		}
		req.Publisher = p[0]
	}
	if o, ok := q["offset"]; ok {
		if req.Publish {
			return req, &BadRequest{Detail: "publish and offset are different requests; pass one"}
		}
		n, err := strconv.ParseInt(o[0], 10, 64)
		switch {
		case err != nil || strings.HasPrefix(o[0], "+"):
			// ParseInt takes a leading "+"; the protocol's offset is
			// digits, with "-" only to be told that it is negative.
			return req, &BadRequest{Detail: fmt.Sprintf("offset=%.20q is not an integer", o[0])}
		case n < 0:
			return req, &BadRequest{Detail: fmt.Sprintf("offset=%d is negative; 0 means the earliest row", n)}
		}
		req.Offset = n
	}
	if w, ok := q["where"]; ok {
		if req.Publish {
			return req, &BadRequest{Detail: "publish takes no where=; a publisher receives no rows"}
		}
		if !cut {
			where = []byte(w[0])
		}
		if firstByte(where) != '{' || !json.Valid(where) {
			return req, &BadRequest{Detail: "where must be a JSON object of column to value, e.g. {\"side\":1}"}
		}
		req.Where = where
	}
	return req, nil
}

// cutWhere takes the value of the first where= out of rawQuery, decoded
// into a slice of its own, and returns the query left ("where=" kept in
// its place, so url.ParseQuery still sees the parameter, and counts it),
// with cut true. A where= may be about 100 KB of URL (limits
// max_where_bytes is 64 KiB of JSON), and url.ParseQuery would decode it
// into a string that Request.Where would then copy: twice the filter's
// size of garbage per subscriber, which a burst of subscribers with large
// filters leaves for the collector. A value that is not cleanly
// URL-encoded (a bad escape, or a ';', which url.ParseQuery refuses) is
// left in place, so the refusal is url.ParseQuery's own, word for word.
func cutWhere(rawQuery string) (rest string, where []byte, cut bool) {
	for p := 0; p < len(rawQuery); {
		end := strings.IndexByte(rawQuery[p:], '&')
		if end < 0 {
			end = len(rawQuery)
		} else {
			end += p
		}
		if strings.HasPrefix(rawQuery[p:end], "where=") {
			start := p + len("where=")
			where, ok := queryUnescape(rawQuery[start:end])
			if !ok {
				return rawQuery, nil, false
			}
			return rawQuery[:start] + rawQuery[end:], where, true
		}
		p = end + 1
	}
	return rawQuery, nil, false
}

// queryUnescape decodes a query value as url.QueryUnescape does ('+' is a
// space, %XX a byte), into a slice of its own; ok is false when s holds a
// ';' or a malformed escape, which url.ParseQuery refuses.
func queryUnescape(s string) (b []byte, ok bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ';':
			return nil, false
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return nil, false
			}
			n++
			i += 2
		}
	}
	b = make([]byte, 0, len(s)-2*n)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			b = append(b, ' ')
		case '%':
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return b, true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// Query encodes the request's query string (without "?"), the inverse of
// ParseRequest's query half.
func (r Request) Query() string {
	var parts []string
	if r.Publish {
		parts = append(parts, "publish")
		if r.Publisher != "" {
			parts = append(parts, "publisher="+url.QueryEscape(r.Publisher))
		}
		return strings.Join(parts, "&")
	}
	if r.Offset != Null {
		parts = append(parts, "offset="+strconv.FormatInt(r.Offset, 10))
	}
	if len(r.Where) > 0 {
		parts = append(parts, "where="+url.QueryEscape(string(r.Where)))
	}
	return strings.Join(parts, "&")
}
