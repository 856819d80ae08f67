package txbox

import (
	"slices"
	"testing"
)

// pauseLog follows a Window through held counts the way an inbox does and
// records what OnPauseChange would hear: the starting state, then every
// transition.
type pauseLog struct {
	w      Window
	paused bool
	calls  []bool
}

func (p *pauseLog) start(h Held) {
	p.paused = p.w.Start(h)
	p.calls = append(p.calls, p.paused)
}

func (p *pauseLog) hold(h Held) {
	if next := p.w.Next(p.paused, h); next != p.paused {
		p.paused = next
		p.calls = append(p.calls, next)
	}
}

// TestWindowFollowsTheWorkedExample is the original's worked example with
// MaxRows 100 and ResumeAt 0.5: each row starts an inbox holding some rows,
// then moves the held count through the steps, and names every call
// OnPauseChange gets.
func TestWindowFollowsTheWorkedExample(t *testing.T) {
	w := Window{MaxRows: 100, ResumeAt: 0.5}
	rows := func(n ...int64) []Held {
		var hs []Held
		for _, r := range n {
			hs = append(hs, Held{Rows: r, Bytes: r * 10})
		}
		return hs
	}
	for _, tc := range []struct {
		name  string
		start int64
		then  []Held
		calls []bool
	}{
		{"empty starts active", 0, nil, []bool{false}},
		{"40 held starts active", 40, nil, []bool{false}},
		{"50 held (low water) starts active", 50, nil, []bool{false}},
		{"100 held starts paused", 100, nil, []bool{true}},
		{"120 held starts paused", 120, nil, []bool{true}},
		{"processing 100 down to 50 stays paused", 100, rows(99, 75, 51, 50), []bool{true}},
		{"one more processed, 49, resumes", 100, rows(50, 49), []bool{true, false}},
		{"receiving back up to 100 pauses again", 100, rows(50, 49, 60, 99, 100), []bool{true, false, true}},
		{"a restart with 70 held starts active", 70, nil, []bool{false}},
		{"a restart in the band fills to the bound", 70, rows(71, 99, 100), []bool{false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pauseLog{w: w}
			p.start(Held{Rows: tc.start, Bytes: tc.start * 10})
			for _, h := range tc.then {
				p.hold(h)
			}
			if !slices.Equal(p.calls, tc.calls) {
				t.Errorf("OnPauseChange heard %v, want %v", p.calls, tc.calls)
			}
		})
	}
}

// TestWindowBoundsBytes is the byte bound: the row that crosses it is the
// last one taken, an empty inbox takes a row larger than the whole bound,
// and the pause ends strictly below ResumeAt of the bytes.
func TestWindowBoundsBytes(t *testing.T) {
	w := Window{MaxBytes: 1000, ResumeAt: 0.5}
	for _, tc := range []struct {
		name string
		held Held
		take bool
		full bool
		low  bool
	}{
		{"empty takes an oversized row", Held{0, 0}, true, false, true},
		{"one oversized row is full", Held{1, 5000}, false, true, false},
		{"below the bound takes the crossing row", Held{3, 900}, true, false, false},
		{"after the crossing row it is full", Held{4, 1100}, false, true, false},
		{"exactly at the bound is full", Held{4, 1000}, false, true, false},
		{"exactly at low water is not low", Held{2, 500}, true, false, false},
		{"one byte below low water is low", Held{2, 499}, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := w.Take(tc.held); got != tc.take {
				t.Errorf("Take(%+v) = %v, want %v", tc.held, got, tc.take)
			}
			if got := w.Full(tc.held); got != tc.full {
				t.Errorf("Full(%+v) = %v, want %v", tc.held, got, tc.full)
			}
			if got := w.Low(tc.held); got != tc.low {
				t.Errorf("Low(%+v) = %v, want %v", tc.held, got, tc.low)
			}
		})
	}
	p := &pauseLog{w: w}
	p.start(Held{Rows: 1, Bytes: 400})
	for _, h := range []Held{{2, 1100}, {1, 600}, {1, 500}, {0, 0}} {
		p.hold(h)
	}
	if want := []bool{false, true, false}; !slices.Equal(p.calls, want) {
		t.Errorf("OnPauseChange heard %v, want %v", p.calls, want)
	}
}

// TestWindowRowBoundNeedsBothCountsLow shows a paused inbox with a row
// bound waits for rows and bytes both to fall below low water.
func TestWindowRowBoundNeedsBothCountsLow(t *testing.T) {
	w := Window{MaxBytes: 1000, MaxRows: 10, ResumeAt: 0.5}
	if w.Next(true, Held{Rows: 4, Bytes: 600}) != true {
		t.Error("few rows but bytes above low water resumed")
	}
	if w.Next(true, Held{Rows: 5, Bytes: 100}) != true {
		t.Error("few bytes but rows at low water resumed")
	}
	if w.Next(true, Held{Rows: 4, Bytes: 499}) != false {
		t.Error("both below low water stayed paused")
	}
}

func TestWindowValidateRefusesNonsense(t *testing.T) {
	for _, w := range []Window{{MaxBytes: -1}, {MaxRows: -1}, {ResumeAt: 1.5}, {ResumeAt: -0.1}} {
		if w.Validate() == nil {
			t.Errorf("Validate(%+v) accepted it", w)
		}
	}
	if err := (Window{}).Validate(); err != nil {
		t.Errorf("the zero window (defaults) is refused: %v", err)
	}
}
