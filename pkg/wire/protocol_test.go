package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestGreetingRoundTripsThroughItsEncoding(t *testing.T) {
	cases := []Greeting{
		{Streamcast: 4, Stream: "trades", EndOffset: 1861, Replay: &Range{1200, 1861}, Durable: true, GroupCommit: true,
			Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`), Metadata: "file:///m.json",
			MetadataHint: "file:///h.text", StreamID: "5f0c", Where: json.RawMessage(`{"side":1}`)},
		{Streamcast: 4, Stream: "", EndOffset: Null},
		{Streamcast: 5, Stream: "p", EndOffset: 7, Durable: true, Publisher: &PublisherMark{ID: "loader-1", LastSeq: 41, LastOffset: Null}},
		{Streamcast: 4, Stream: "ünï\"code\n", EndOffset: 0, Replay: &Range{0, 0}, Publisher: &PublisherMark{ID: "x", LastSeq: 3, LastOffset: 9}},
	}
	for _, g := range cases {
		b := g.AppendJSON(nil)
		if !json.Valid(b) {
			t.Fatalf("greeting %s is not valid JSON", b)
		}
		got, err := ParseGreeting(b)
		if err != nil {
			t.Fatalf("parse %s: %v", b, err)
		}
		if !reflect.DeepEqual(*got, g) {
			t.Errorf("round trip of %s:\n got %+v\nwant %+v", b, *got, g)
		}
	}
}

func TestGreetingWritesNullsForAbsentFields(t *testing.T) {
	g := Greeting{Stream: "", EndOffset: Null}
	want := `{"streamcast":4,"stream":"","end_offset":null,"replay":null,"durable":false,"group_commit":false,"schema":null,"metadata":null,"metadata_hint":null,"stream_id":null,"where":null}`
	if got := string(g.AppendJSON(nil)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestParseGreetingRefusesWhatIsNotAGreeting(t *testing.T) {
	for _, in := range []string{``, `<html>502</html>`, `[]`, `{"stream":"x"}`, `{"streamcast":3}`, `{"streamcast":"4"}`,
		`{"streamcast":4,"end_offset":-3}`, `{"streamcast":4,"replay":[5,2]}`, `{"streamcast":4,"replay":[1]}`} {
		_, err := ParseGreeting([]byte(in))
		var pe *ProtocolError
		if !errors.As(err, &pe) {
			t.Errorf("ParseGreeting(%q) = %v, want a *ProtocolError", in, err)
		}
	}
}

func TestParseGreetingIsLenientAboutTypes(t *testing.T) {
	g, err := ParseGreeting([]byte(`{"streamcast":5,"schema":"nope","where":[1],"metadata":7,"stream_id":null,"extra":{"x":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if g.Schema != nil || g.Where != nil || g.Metadata != "" || g.EndOffset != Null || g.Durable {
		t.Errorf("coercion: %+v", g)
	}
}

func TestCloseReasonDropsTrailingFieldsToFit(t *testing.T) {
	long := strings.Repeat("9", 40)
	r := CloseReason("x", Field{"a", int64(1)}, Field{"b", long}, Field{"c", long}, Field{"d", long})
	if len(r) > MaxReasonBytes {
		t.Fatalf("reason is %d bytes", len(r))
	}
	p := ParseReason(r)
	if p.Error != "x" || p.Int("a") != 1 || p.Has("d") {
		t.Errorf("trimmed reason %s", r)
	}
}

func TestCloseReasonCutsALongDetail(t *testing.T) {
	d := strings.Repeat("é", 200)
	r := CloseReason(ReasonBadRequest, Field{"detail", d})
	if len(r) > MaxReasonBytes || !json.Valid([]byte(r)) {
		t.Fatalf("reason %q (%d bytes)", r, len(r))
	}
	if got := ParseReason(r).String("detail"); !strings.HasSuffix(got, "…") || len(got) < minStringBytes {
		t.Errorf("detail %q", got)
	}
}

func TestStreamNotFoundTrimsItsListAndCountsTheRest(t *testing.T) {
	var names []string
	for i := 0; i < 40; i++ {
		names = append(names, "stream-"+strings.Repeat("x", i%7))
	}
	e := &StreamNotFound{Serves: names}
	r := e.Reason()
	if len(r) > MaxReasonBytes {
		t.Fatalf("reason is %d bytes: %s", len(r), r)
	}
	got := ParseClose(CloseNoSuchStream, r).(*StreamNotFound)
	if len(got.Serves) == 0 || len(got.Serves)+got.Omitted != len(names) {
		t.Errorf("serves %d + omitted %d != %d (%s)", len(got.Serves), got.Omitted, len(names), r)
	}
	if !reflect.DeepEqual(got.Serves, names[:len(got.Serves)]) {
		t.Errorf("serves is not a prefix: %v", got.Serves)
	}
	if !strings.Contains(got.Error(), "more") {
		t.Errorf("sentence does not say names are missing: %s", got.Error())
	}
	short := (&StreamNotFound{Serves: []string{"a", "b"}}).Reason()
	if short != `{"error":"no_such_stream","serves":["a","b"]}` {
		t.Errorf("short list reason %s", short)
	}
}

func TestRefusalsRoundTripThroughTheirCloseFrames(t *testing.T) {
	cases := []Refusal{
		&BadRequest{Detail: "offset='abc' is not an integer"},
		&StreamNotFound{Serves: []string{"a", "trades"}},
		&StreamNotFound{Serves: []string{}},
		&Superseded{Publisher: "p1"},
		&StreamRetired{At: 1790038800123456, EndOffset: 1862},
		&ExactlyOnceUnavailable{Why: "stream"},
		&NotReplayable{Why: WhyNotDurable, Offset: Null, Earliest: Null, EndOffset: Null, MaxReplay: Null},
		&NotReplayable{Why: WhyAhead, Offset: 900, Earliest: Null, EndOffset: 100, MaxReplay: Null},
		&NotReplayable{Why: WhyTooOld, Offset: 100, Earliest: Null, EndOffset: 250000, MaxReplay: 100000},
		&NotReplayable{Why: WhyEvicted, Offset: 3, Earliest: 5000, EndOffset: 9000, MaxReplay: Null},
		&NotReplayable{Why: "martian", Offset: 3, Earliest: 1, EndOffset: 2, MaxReplay: 4},
		&TooSlow{Offset: 12345, Behind: 8192},
		&TooSlow{Offset: Null, Behind: 8192},
		&RelayOnly{Upstream: "ws://origin.example:8765/trades"},
	}
	for _, want := range cases {
		r := want.Reason()
		if len(r) > MaxReasonBytes || !json.Valid([]byte(r)) {
			t.Errorf("%T reason %q", want, r)
		}
		got := ParseClose(want.Code(), r)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("code %d reason %s:\n got %#v\nwant %#v", want.Code(), r, got, want)
		}
		if got.Error() == "" || strings.Contains(got.Error(), "?") {
			t.Errorf("%T sentence %q", got, got.Error())
		}
	}
}

func TestNotReplayableSaysWhereToResume(t *testing.T) {
	e := &NotReplayable{Why: WhyTooOld, Offset: 100, EndOffset: 250000, MaxReplay: 100000, Earliest: Null}
	for _, want := range []string{"offset 100", "max_replay=100000", "250000", "resume from offset 150000"} {
		if !strings.Contains(e.Error(), want) {
			t.Errorf("%q lacks %q", e.Error(), want)
		}
	}
	e = ParseClose(CloseNotReplayable, `{"error":"not_replayable","why":"evicted"}`).(*NotReplayable)
	if !strings.Contains(e.Error(), "?") {
		t.Errorf("a trimmed reason should render missing numbers as ?: %s", e.Error())
	}
}

// TestTooOldCarriesEarliestAndTrimsItFirst: a too_old reason carries
// earliest (where the published tables take over from the log), and when
// offsets past a restore's fence make it too long for the close frame,
// earliest goes first: the resume point end_offset − max_replay stays.
func TestTooOldCarriesEarliestAndTrimsItFirst(t *testing.T) {
	e := &NotReplayable{Why: WhyTooOld, Offset: 100, Earliest: 7, EndOffset: 250000, MaxReplay: 100000}
	got := ParseClose(CloseNotReplayable, e.Reason()).(*NotReplayable)
	if *got != *e {
		t.Errorf("too_old read back as %+v from %s; want %+v", *got, e.Reason(), *e)
	}
	const fenced = 1<<40 + 12345
	e = &NotReplayable{Why: WhyTooOld, Offset: fenced, Earliest: fenced, EndOffset: fenced + 1e9, MaxReplay: 100000}
	r := e.Reason()
	got = ParseClose(CloseNotReplayable, r).(*NotReplayable)
	if len(r) > MaxReasonBytes || got.Offset != e.Offset || got.EndOffset != e.EndOffset || got.MaxReplay != e.MaxReplay {
		t.Errorf("a too_old reason of fenced offsets, %d bytes: %s; want offset, end_offset and max_replay within %d bytes", len(r), r, MaxReasonBytes)
	}
}

func TestParseCloseMapsEveryCode(t *testing.T) {
	cases := map[int]any{
		CloseNormal: nil, CloseGoingAway: &GoingAway{}, CloseTooBig: &TooBig{}, CloseBadRequest: &BadRequest{},
		CloseNoSuchStream: &StreamNotFound{}, CloseSuperseded: &Superseded{}, CloseRetired: &StreamRetired{},
		CloseExactlyOnceUnavailable: &ExactlyOnceUnavailable{}, CloseNotReplayable: &NotReplayable{}, CloseTooSlow: &TooSlow{}, CloseRelay: &RelayOnly{}, 4999: &CloseError{},
	}
	for code, want := range cases {
		got := ParseClose(code, "not json at all")
		if reflect.TypeOf(got) != reflect.TypeOf(want) {
			t.Errorf("ParseClose(%d) = %T, want %T", code, got, want)
		}
	}
	if e := ParseClose(CloseBadRequest, "plain text").(*BadRequest); e.Detail != "plain text" {
		t.Errorf("a plain-text 4400 reason should become the detail, got %q", e.Detail)
	}
}

func TestRepliesRoundTrip(t *testing.T) {
	cases := []Reply{
		{OK: []int64{5}},
		{OK: []int64{5, 6, 7}},
		{OK: []int64{Null, Null}},
		{OK: []int64{3, Null}, Duplicate: true},
		{OK: []int64{}},
		{Error: ReplyRejected, Detail: `column "price": is a string, not a number`},
		{Error: ReplyCommitFailed, Detail: "disk full"},
		{Error: ReplySequenceGap, Expected: 11, Got: 15},
		{Error: ReplyBadFrame, Detail: "publish frame is an empty list"},
	}
	for _, want := range cases {
		b := want.AppendJSON(nil)
		var got Reply
		if err := ParseReply(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if want.Error != ReplySequenceGap {
			want.Expected, want.Got = Null, Null
		}
		if len(want.OK) == 0 && len(got.OK) == 0 {
			got.OK, want.OK = nil, nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", b, got, want)
		}
	}
	if got := string(AppendOK(nil, 10, 3)); got != `{"ok":[10,11,12]}` {
		t.Errorf("AppendOK = %s", got)
	}
	if got := string(AppendOK(nil, Null, 2)); got != `{"ok":[null,null]}` {
		t.Errorf("AppendOK(Null) = %s", got)
	}
}

func TestReplyErrorsAreTyped(t *testing.T) {
	var r Reply
	_ = ParseReply([]byte(`{"error":"sequence_gap","expected":3,"got":9}`), &r)
	var gap *SequenceGap
	if !errors.As(r.Err(), &gap) || gap.Expected != 3 || gap.Got != 9 {
		t.Errorf("sequence gap: %v", r.Err())
	}
	_ = ParseReply([]byte(`{"error":"weird"}`), &r)
	var pe *ProtocolError
	if !errors.As(r.Err(), &pe) {
		t.Errorf("unknown error code: %v", r.Err())
	}
	for _, bad := range []string{`[]`, `{}`, `{"ok":"x"}`, `{"ok":[-1]}`, `{"error":""}`, `nope`} {
		if err := ParseReply([]byte(bad), &r); err == nil {
			t.Errorf("ParseReply(%s) accepted", bad)
		}
	}
}

func TestParseFrameSplitsTheTriple(t *testing.T) {
	cases := []struct {
		in      string
		off, ts int64
		row     string
		bad     bool
	}{
		{in: `[1861,1790038800124001,{"a":1}]`, off: 1861, ts: 1790038800124001, row: `{"a":1}`},
		{in: `[null,5,{"a":[1,2]}]`, off: Null, ts: 5, row: `{"a":[1,2]}`},
		{in: ` [ 0 , null , { } ] `, off: 0, ts: Null, row: `{ }`},
		{in: `[1,2,{"a":"]"}]`, off: 1, ts: 2, row: `{"a":"]"}`},
		{in: `[1,2]`, bad: true},
		{in: `[-1,2,{}]`, bad: true},
		{in: `[01,2,{}]`, bad: true},
		{in: `[1,2,3]`, bad: true},
		{in: `{"a":1}`, bad: true},
		{in: `[1,2,{}`, bad: true},
		{in: `[99999999999999999999,2,{}]`, bad: true},
		// Four elements, the last two objects: the "row" {},{} would be
		// handed out as one (found by FuzzParseFrame, seed four-elements).
		{in: `[null,null,{` + "\n" + `},{}]`, bad: true},
		{in: `[1,2,{"a":1},{"b":"}"}]`, bad: true},
		{in: `[1,2,{"a":{"b":[1,{}]},"c":"\"}{"}]`, off: 1, ts: 2, row: `{"a":{"b":[1,{}]},"c":"\"}{"}`},
	}
	for _, c := range cases {
		off, ts, row, bad := parseFrame([]byte(c.in))
		if (bad != "") != c.bad {
			t.Errorf("parseFrame(%s) bad=%q", c.in, bad)
			continue
		}
		if !c.bad && (off != c.off || ts != c.ts || string(row) != c.row) {
			t.Errorf("parseFrame(%s) = %d %d %s", c.in, off, ts, row)
		}
	}
	frame := AppendFrame(nil, 7, 8, []byte(`{"x":null}`))
	if string(frame) != `[7,8,{"x":null}]` {
		t.Errorf("AppendFrame = %s", frame)
	}
}

func TestParseRequest(t *testing.T) {
	cases := []struct {
		path, query string
		want        Request
		bad         string
	}{
		{path: "/trades", want: Request{Stream: "trades", Offset: Null}},
		{path: "/", query: "offset=0", want: Request{Stream: "", Offset: 0}},
		{path: "/t", query: "offset=5&where=%7B%22a%22%3A1%7D", want: Request{Stream: "t", Offset: 5, Where: json.RawMessage(`{"a":1}`)}},
		{path: "/t", query: "publish", want: Request{Stream: "t", Publish: true, Offset: Null}},
		{path: "/t", query: "publish&publisher=p1", want: Request{Stream: "t", Publish: true, Publisher: "p1", Offset: Null}},
		{path: "/t", query: "bogus=1&zz", bad: "bogus, zz"},
		{path: "/t", query: "offset=1&offset=2", bad: "more than once"},
		{path: "/t", query: "offset=-5", bad: "negative"},
		{path: "/t", query: "offset=abc", bad: "not an integer"},
		{path: "/t", query: "offset=%2B5", bad: "not an integer"},
		{path: "/t", query: "offset=+5", bad: "not an integer"},
		{path: "/t", query: "publish&offset=1", bad: "publish and offset"},
		{path: "/t", query: "publish&where=%7B%7D", bad: "where"},
		{path: "/t", query: "publisher=p", bad: "needs publish"},
		{path: "/t", query: "where=[1]", bad: "JSON object"},
		{path: "/t", query: "publish&publisher=", bad: "publisher id"},
	}
	for _, c := range cases {
		got, err := ParseRequest(c.path, c.query)
		if c.bad != "" {
			var br *BadRequest
			if !errors.As(err, &br) || !strings.Contains(br.Detail, c.bad) {
				t.Errorf("ParseRequest(%s?%s) = %v, want a 4400 mentioning %q", c.path, c.query, err, c.bad)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseRequest(%s?%s) = %+v, %v", c.path, c.query, got, err)
			continue
		}
		back, err := ParseRequest(c.path, got.Query())
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("Query() %q does not parse back: %+v %v", got.Query(), back, err)
		}
	}
}

func TestCountElements(t *testing.T) {
	for in, want := range map[string]int{`[]`: 0, `[{}]`: 1, `[{"a":[1,2]},{"b":"x,y]"}, {}]`: 3, ` [ 1 ] `: 1, `["\"",2]`: 2} {
		if n, ok := countElements([]byte(in)); !ok || n != want {
			t.Errorf("countElements(%s) = %d %v, want %d", in, n, ok, want)
		}
	}
}

func TestGoingAwayReasonIsCompactJSONTheClientReads(t *testing.T) {
	for _, why := range []string{WhyServerStopping, WhyStreamStopped} {
		reason := GoingAwayReason(why)
		if want := `{"error":"going_away","why":"` + why + `"}`; reason != want {
			t.Fatalf("reason %s, want %s", reason, want)
		}
		ga, ok := ParseClose(CloseGoingAway, reason).(*GoingAway)
		if !ok || ga.Why != why || ga.Reason != reason {
			t.Fatalf("ParseClose(1001, %s) = %#v", reason, ga)
		}
		if strings.Contains(ga.Error(), "{") {
			t.Errorf("the error shows the raw JSON: %s", ga.Error())
		}
	}
	// A plain-text reason (an older server, a proxy) is still read.
	ga := ParseClose(CloseGoingAway, "server shutting down").(*GoingAway)
	if ga.Why != "" || !strings.Contains(ga.Error(), "server shutting down") {
		t.Errorf("plain-text 1001: %#v %s", ga, ga.Error())
	}
}
