package wire

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// The parsers read bytes from the network: none may panic, and what they
// accept must survive re-encoding. Seeds live in testdata/fuzz.

func FuzzParseClose(f *testing.F) {
	f.Add(4416, `{"error":"not_replayable","why":"too_old","offset":100,"end_offset":250000,"max_replay":100000}`)
	f.Add(4404, `{"error":"no_such_stream","omitted":3,"serves":["a","b"]}`)
	f.Add(4429, `{"error":"too_slow","offset":null,"behind":8192}`)
	f.Add(4400, `plain text`)
	f.Fuzz(func(t *testing.T, code int, reason string) {
		err := ParseClose(code, reason)
		if err == nil {
			return
		}
		_ = err.Error()
		if r, ok := err.(Refusal); ok {
			again := r.Reason()
			if len(again) > MaxReasonBytes {
				t.Fatalf("re-encoded reason is %d bytes: %s", len(again), again)
			}
			if !json.Valid([]byte(again)) {
				t.Fatalf("re-encoded reason is not JSON: %s", again)
			}
		}
	})
}

func FuzzCloseReason(f *testing.F) {
	f.Add("no_such_stream", "serves", "a,b,c", "detail", "x", int64(5))
	f.Fuzz(func(t *testing.T, name, k1, list, k2, s string, n int64) {
		var names []string
		for i := 0; i < len(list); i += 3 {
			names = append(names, list[i:min(i+3, len(list))])
		}
		r := CloseReason(name, Field{k1, names}, Field{k2, s}, Field{"n", n})
		if len(r) > MaxReasonBytes || !json.Valid([]byte(r)) || !utf8.ValidString(r) {
			t.Fatalf("reason %q (%d bytes)", r, len(r))
		}
		nf := &StreamNotFound{Serves: names}
		if r := nf.Reason(); len(r) > MaxReasonBytes || !json.Valid([]byte(r)) {
			t.Fatalf("4404 reason %q", r)
		}
	})
}

func FuzzParseGreeting(f *testing.F) {
	f.Add([]byte(`{"streamcast":4,"stream":"trades","end_offset":1861,"replay":[1200,1861],"durable":true,"group_commit":true,"schema":{"type":"object"},"metadata":"s3://b/m.json","metadata_hint":null,"stream_id":"5f0c","where":null}`))
	f.Add([]byte(`{"streamcast":5,"publisher":{"id":"p","last_seq":3,"last_offset":null}}`))
	f.Add([]byte(`<html>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ParseGreeting(data)
		if err != nil {
			return
		}
		b := g.AppendJSON(nil)
		if !json.Valid(b) {
			t.Fatalf("re-encoded greeting is not JSON: %s", b)
		}
		g2, err := ParseGreeting(b)
		if err != nil {
			t.Fatalf("re-encoded greeting %s does not parse: %v", b, err)
		}
		// Raw schema/where are compacted on the way out; compare the rest.
		g.Schema, g.Where, g2.Schema, g2.Where = nil, nil, nil, nil
		if !utf8.ValidString(g.Stream+g.Metadata+g.MetadataHint+g.StreamID) || (g.Publisher != nil && !utf8.ValidString(g.Publisher.ID)) {
			return // invalid UTF-8 is replaced on the way out
		}
		if !reflect.DeepEqual(g, g2) {
			t.Fatalf("round trip:\n%+v\n%+v", g, g2)
		}
	})
}

func FuzzParseReply(f *testing.F) {
	f.Add([]byte(`{"ok":[1,2,3]}`))
	f.Add([]byte(`{"ok":[null],"duplicate":true}`))
	f.Add([]byte(`{"error":"sequence_gap","expected":3,"got":9}`))
	f.Add([]byte(`{"error":"rejected","detail":"column \"x\""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast, slow Reply
		err := ParseReply(data, &fast)
		if err != nil {
			return
		}
		_ = fast.Err()
		// The fast path must agree with encoding/json on what it accepts.
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			t.Fatalf("ParseReply accepted non-JSON %q", data)
		}
		b := fast.AppendJSON(nil)
		if err := ParseReply(b, &slow); err != nil {
			t.Fatalf("re-encoded reply %s: %v", b, err)
		}
		if len(fast.OK) == 0 && len(slow.OK) == 0 {
			fast.OK, slow.OK = nil, nil
		}
		if fast.Error == "" && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("round trip %s:\n%+v\n%+v", b, fast, slow)
		}
	})
}

func FuzzParseFrame(f *testing.F) {
	f.Add([]byte(`[1861,1790038800124001,{"event_ts":1790038800123456,"price":85565.0}]`))
	f.Add([]byte(`[null,null,{}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		off, ts, row, bad := parseFrame(data)
		if bad != "" {
			return
		}
		if off < Null || len(row) < 2 || row[0] != '{' || row[len(row)-1] != '}' {
			t.Fatalf("parseFrame(%q) = %d %d %q", data, off, ts, row)
		}
		if json.Valid(data) {
			var v []json.RawMessage
			if json.Unmarshal(data, &v) != nil || len(v) != 3 {
				t.Fatalf("accepted %q, which is not a triple", data)
			}
		}
	})
}

func FuzzParseRequest(f *testing.F) {
	f.Add("/trades", "offset=5&where=%7B%22a%22%3A1%7D")
	f.Add("/t", "publish&publisher=p")
	f.Fuzz(func(t *testing.T, path, query string) {
		req, err := ParseRequest(path, query)
		if err != nil {
			return
		}
		back, err := ParseRequest(path, req.Query())
		if err != nil || !reflect.DeepEqual(req, back) {
			t.Fatalf("%q?%q → %+v → %q → %+v %v", path, query, req, req.Query(), back, err)
		}
	})
}

// FuzzParseRequestReadsTheQueryAsParseQuery: ParseRequest decodes where=
// itself, to spare a large filter a copy, and must read every query as
// url.ParseQuery does: the same refusal, word for word, for a query that
// does not decode, and the same where= text for one that does.
func FuzzParseRequestReadsTheQueryAsParseQuery(f *testing.F) {
	for _, q := range []string{
		`where=%7B%22a%22%3A%5B%22x+y%22%5D%7D`,
		`offset=5&where={"a":1}&x=1`,
		`where=%7B%22a%22%3A1%7D&where=%7B%7D`,
		`wher%65=%7B%7D&where=%7B%7D`,
		`wher%65=%7B%22a%22%3A1%7D`,
		`where=%7B%zz%7D`,
		`where=%7B%7`,
		`where={};x`,
		`x=%zz&where={}&y=%qq`,
		`x=%zz&where={}%`,
		`a;b&where={}`,
		`where`,
		`where=`,
		`&&where={}&&`,
		`=1&where={}`,
		`publish&where={"a":1}`,
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, query string) {
		req, err := ParseRequest("/s", query)
		vals, qerr := url.ParseQuery(query)
		if qerr != nil {
			want := "the query string is not URL-encoded: " + qerr.Error()
			if br, ok := err.(*BadRequest); !ok || br.Detail != want {
				t.Fatalf("%q: ParseRequest says %v, want %q", query, err, want)
			}
			return
		}
		if err != nil {
			if strings.Contains(err.Error(), "not URL-encoded") {
				t.Fatalf("%q: ParseRequest says %v, url.ParseQuery decodes it", query, err)
			}
			return
		}
		w, ok := vals["where"]
		if ok != (req.Where != nil) || ok && string(req.Where) != w[0] {
			t.Fatalf("%q: ParseRequest reads where as %q, url.ParseQuery as %q", query, req.Where, w)
		}
	})
}

// FuzzParseBasic feeds arbitrary Authorization values to the parser: no
// panic, and what it accepts is a non-empty user without a colon that
// encodes back to credentials it reads the same.
func FuzzParseBasic(f *testing.F) {
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte("alice:pw")))
	f.Add("basic   " + base64.StdEncoding.EncodeToString([]byte("a:b:c")))
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte(":nouser")))
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte("nocolon")))
	f.Add("Bearer abc")
	f.Add("Basic !!!")
	f.Add("Basic")
	f.Add("Basic " + strings.Repeat("QUFB", 2000))
	f.Fuzz(func(t *testing.T, h string) {
		user, pw, ok := ParseBasic(h)
		if !ok {
			if user != "" || pw != "" {
				t.Fatalf("refused %q but returned %q, %q", h, user, pw)
			}
			return
		}
		if user == "" || strings.Contains(user, ":") {
			t.Fatalf("accepted %q with user %q", h, user)
		}
		u2, pw2, ok2 := ParseBasic(BasicAuthorization(url.UserPassword(user, pw)))
		if !ok2 || u2 != user || pw2 != pw {
			t.Fatalf("%q: re-encoded credentials read back as %q %q %v", h, u2, pw2, ok2)
		}
	})
}

// objectEndByByte is objectEnd as it was, a byte at a time through strings
// too: the reference FuzzObjectEnd holds the IndexByte version to.
func objectEndByByte(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch rowByte[b[i]] {
		case 0:
			continue
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return i + 1
			}
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		}
	}
	return -1
}

// FuzzObjectEnd: objectEnd finds the end of an object exactly where a scan
// a byte at a time does, escapes and unterminated strings included.
func FuzzObjectEnd(f *testing.F) {
	for _, seed := range []string{
		`{"a":"b"}`, `{"a":"b\"}"}`, `{"a":"b\\"}`, `{"a":"\\\"}"}x`, `{"a":["}"]}`, `{"a`, `{"a\`,
		`{"event_ts":1790038800123456,"symbol":"BTC-USD","price":85565.0}`, `{}{}`, `{"":{"":{}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		if got, want := objectEnd(b, 0), objectEndByByte(b, 0); got != want {
			t.Fatalf("objectEnd(%q) = %d; a byte at a time it is %d", b, got, want)
		}
	})
}

// FuzzScanUint: scanUint reads what strconv reads, and refuses what it
// refuses, an overflow included; a leading zero is refused too.
func FuzzScanUint(f *testing.F) {
	for _, seed := range []string{"0", "7", "1790038800124001", "922337203685477579", "9223372036854775807", "9223372036854775808", "99999999999999999999", "012", "12a", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, end, ok := scanUint([]byte(s), 0)
		digits := 0
		for digits < len(s) && s[digits] >= '0' && s[digits] <= '9' {
			digits++
		}
		want, err := strconv.ParseInt(s[:digits], 10, 64)
		switch {
		case digits == 0 || (s[0] == '0' && digits > 1):
			if ok {
				t.Fatalf("scanUint(%q) = %d: want a refusal", s, n)
			}
		case err != nil:
			if ok {
				t.Fatalf("scanUint(%q) = %d, which overflows", s, n)
			}
		case ok && (n != want || end != digits):
			t.Fatalf("scanUint(%q) = %d, %d; want %d, %d", s, n, end, want, digits)
		case !ok && want < 9223372036854775800:
			// The overflow check is conservative only within 8 of the
			// largest int64.
			t.Fatalf("scanUint(%q) refused %d", s, want)
		}
	})
}
