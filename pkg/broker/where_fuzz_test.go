package broker

import (
	"bytes"
	"errors"
	"net/url"
	"testing"

	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// FuzzWhereParam feeds arbitrary where= query text through the whole path
// a subscribe takes: the URL query parser (wire.ParseRequest), the
// max_where_bytes bound and the filter compiler, for a stream with a
// schema and one without. It must never panic; a refusal is a 4400 whose
// reason fits a close frame and reads back as a bad request; an accepted
// filter's echo, sent as where=, is accepted and echoes itself.
func FuzzWhereParam(f *testing.F) {
	for _, s := range []string{
		`where=%7B%22side%22%3A1%7D`,
		`where={"symbol":["S1","S2",null]}`,
		`where={"price":[0.0,-0.0,1e300]}`,
		`where={"event_ts":[1,2,3,1]}`,
		`where=%7B%22a%22%3A%5B%5B1%5D%5D%7D`,
		`where={}&offset=3`,
		`where=[1]`,
		`where={"side":1}&where={"side":2}`,
		`where={"trade_id":"%FF"}`,
	} {
		f.Add(s)
	}
	sch, err := schema.Compile([]byte(config.DemoSchema))
	if err != nil {
		f.Fatal(err)
	}
	srv := &Server{}
	streams := []*stream{
		{sch: sch, limits: config.Limits{MaxWhereBytes: 256}},
		{sch: schema.Any(), limits: config.Limits{MaxWhereBytes: 256}},
	}
	f.Fuzz(func(t *testing.T, query string) {
		q, err := wire.ParseRequest("/trades", query)
		if err != nil || q.Where == nil {
			return
		}
		for _, st := range streams {
			flt, echo, err := srv.compileWhere(st, q.Where)
			if err != nil {
				var br *wire.BadRequest
				if !errors.As(err, &br) {
					t.Fatalf("%q refused with %T %v, want a *wire.BadRequest", query, err, err)
				}
				if r := br.Reason(); len(r) > wire.MaxReasonBytes {
					t.Fatalf("%q: the reason is %d bytes, over %d: %s", query, len(r), wire.MaxReasonBytes, r)
				}
				var back *wire.BadRequest
				if !errors.As(wire.ParseClose(br.Code(), br.Reason()), &back) {
					t.Fatalf("%q: reason %s does not read back as a bad request", query, br.Reason())
				}
				continue
			}
			if len(q.Where) > st.limits.MaxWhereBytes {
				t.Fatalf("a %d-byte where= passed a %d-byte limit", len(q.Where), st.limits.MaxWhereBytes)
			}
			if (flt == nil) != bytes.Equal(echo, []byte("{}")) {
				t.Fatalf("%q: filter %v with echo %s", query, flt, echo)
			}
			if len(echo) > st.limits.MaxWhereBytes {
				continue // an echo may be longer than what was sent (1e2 → 100.0)
			}
			q2, err := wire.ParseRequest("/trades", "where="+url.QueryEscape(string(echo)))
			if err != nil {
				t.Fatalf("the echo %s of %q is not a where=: %v", echo, query, err)
			}
			_, echo2, err := srv.compileWhere(st, q2.Where)
			if err != nil || !bytes.Equal(echo, echo2) {
				t.Fatalf("the echo %s of %q compiles to %s (%v)", echo, query, echo2, err)
			}
		}
	})
}
