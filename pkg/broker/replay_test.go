package broker

import (
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/wire"
)

// TestStartRefusesEveryWhy covers the decisions that need a log state
// the server cannot reach on its own (rows evicted by retention).
func TestStartRefusesEveryWhy(t *testing.T) {
	req := func(o int64) replayRequest { return replayRequest{Given: true, Offset: o} }
	cases := []struct {
		name                         string
		req                          replayRequest
		durable                      bool
		earliest, logEnd, front, max int64
		start                        int64
		replay                       bool
		why                          string
		logStart                     int64
		held                         replayHeld
		holeEnd                      int64
	}{
		{"live from the frontier", replayRequest{}, true, 1, 1, 50, -1, 50, false, "", 1, replayHeld{}, 0},
		{"not durable", req(3), false, wire.Null, wire.Null, wire.Null, -1, 0, false, wire.WhyNotDurable, 1, replayHeld{}, 0},
		{"earliest on a log that never held a row", req(0), true, 1, 1, 1, 100, 1, true, "", 1, replayHeld{}, 0},
		{"earliest while the first commit lands", req(0), true, 1, 1, 3, 100, 1, true, "", 1, replayHeld{}, 0},
		{"earliest on a log whose rows all went", req(0), true, 40, 40, 40, 100, 0, false, wire.WhyEmpty, 1, replayHeld{}, 0},
		{"at the frontier", req(40), true, 1, 40, 40, 100, 40, true, "", 1, replayHeld{}, 0},
		{"ahead", req(41), true, 1, 40, 40, 100, 0, false, wire.WhyAhead, 1, replayHeld{}, 0},
		{"too old", req(5), true, 1, 200, 200, 100, 0, false, wire.WhyTooOld, 1, replayHeld{}, 0},
		{"unbounded replay", req(5), true, 1, 200, 200, -1, 5, true, "", 1, replayHeld{}, 0},
		{"evicted", req(5), true, 10, 40, 40, 100, 0, false, wire.WhyEvicted, 1, replayHeld{}, 0},
		{"earliest after eviction", req(0), true, 10, 40, 40, 100, 10, true, "", 1, replayHeld{}, 0},
		{"earliest on an empty log started at 500", req(0), true, 500, 500, 500, 100, 500, true, "", 500, replayHeld{}, 0},
		{"earliest on a log started at 500 whose rows all went", req(0), true, 600, 600, 600, 100, 0, false, wire.WhyEmpty, 500, replayHeld{}, 0},
		{"too old by distance, few rows held", req(5), true, 1, 200, 200, 100, 5, true, "", 1, replayHeld{5, 200, 90}, 0},
		{"too old by distance, rows committed since the count", req(5), true, 1, 200, 200, 100, 5, true, "", 1, replayHeld{5, 190, 90}, 0},
		{"too old by count once new rows are added", req(5), true, 1, 200, 200, 100, 0, false, wire.WhyTooOld, 1, replayHeld{5, 180, 90}, 0},
		{"too old by count", req(5), true, 1, 200, 200, 100, 0, false, wire.WhyTooOld, 1, replayHeld{5, 200, 101}, 0},
		{"a count of another window is not used", req(5), true, 1, 200, 200, 100, 0, false, wire.WhyTooOld, 1, replayHeld{6, 200, 0}, 0},
		{"inside a hole starts at its end", req(20), true, 1, 200, 200, -1, 150, true, "", 1, replayHeld{}, 150},
		{"inside a hole, counted from its end", req(20), true, 1, 200, 200, 100, 150, true, "", 1, replayHeld{}, 150},
		{"inside a hole, too old from its end", req(20), true, 1, 400, 400, 100, 0, false, wire.WhyTooOld, 1, replayHeld{}, 150},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start, replay, nr := startReplay(tc.req, tc.durable, replayExtent{tc.earliest, tc.logEnd, tc.logStart, tc.holeEnd}, tc.front, tc.max, tc.held)
			if tc.why != "" {
				if nr == nil || nr.Why != tc.why {
					t.Fatalf("got %+v, want refusal %s", nr, tc.why)
				}
				if len(nr.Reason()) > wire.MaxReasonBytes || !strings.Contains(nr.Reason(), tc.why) {
					t.Fatalf("reason %s", nr.Reason())
				}
				return
			}
			if nr != nil {
				t.Fatalf("refused %+v", nr)
			}
			if start != tc.start || replay != tc.replay {
				t.Fatalf("start %d replay %v, want %d %v", start, replay, tc.start, tc.replay)
			}
		})
	}
}
