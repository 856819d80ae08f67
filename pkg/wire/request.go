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
	req := Request{Stream: strings.TrimPrefix(path, "/"), Offset: Null}
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
		if firstByte([]byte(w[0])) != '{' || !json.Valid([]byte(w[0])) {
			return req, &BadRequest{Detail: "where must be a JSON object of column to value, e.g. {\"side\":1}"}
		}
		req.Where = json.RawMessage(w[0])
	}
	return req, nil
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
