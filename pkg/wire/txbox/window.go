package txbox

import (
	"fmt"
	"math"
)

// Defaults of the receive window.
const (
	// DefaultMaxBytes bounds the bytes of unprocessed rows an inbox holds
	// before it stops receiving.
	DefaultMaxBytes = 16 << 20
	// DefaultResumeAt is the fraction of each bound the held rows must fall
	// strictly below before a paused inbox receives again.
	DefaultResumeAt = 0.5
)

// Held is what an inbox holds unprocessed: its rows and their bytes.
type Held struct {
	Rows  int64
	Bytes int64
}

// Window is an inbox's receive window: the bounds on what it holds
// unprocessed and the low-water fraction that ends a pause. It is a pure
// value; the inbox asks it what to do and keeps the state.
//
// The rules: the inbox is full (high water) at MaxBytes bytes or, when
// MaxRows is set, MaxRows rows, equality included; a paused inbox resumes
// only when both counts are strictly below ResumeAt of their bound. An
// inbox starts paused exactly when it starts full, so ResumeAt never
// decides the start: no pause state is stored, and none could be replayed
// from counts anyway.
type Window struct {
	MaxBytes int64   // high-water bytes; 0 means DefaultMaxBytes
	MaxRows  int64   // high-water rows; 0 means no row bound
	ResumeAt float64 // low water as a fraction of each bound, in (0, 1]; 0 means DefaultResumeAt
}

// withDefaults returns w with its zero fields set to the defaults.
func (w Window) withDefaults() Window {
	if w.MaxBytes == 0 {
		w.MaxBytes = DefaultMaxBytes
	}
	if w.ResumeAt == 0 {
		w.ResumeAt = DefaultResumeAt
	}
	return w
}

// Validate refuses bounds that cannot work, naming the field and what it
// may be.
func (w Window) Validate() error {
	switch {
	case w.MaxBytes < 0:
		return fmt.Errorf("MaxBytes is %d; give a positive byte bound (0 takes the default %d)", w.MaxBytes, DefaultMaxBytes)
	case w.MaxRows < 0:
		return fmt.Errorf("MaxRows is %d; give a positive row bound, or 0 for none", w.MaxRows)
	case math.IsNaN(w.ResumeAt) || w.ResumeAt < 0 || w.ResumeAt > 1:
		return fmt.Errorf("ResumeAt is %v; give a fraction above 0 and at most 1 (0 takes the default %v)", w.ResumeAt, DefaultResumeAt)
	}
	return nil
}

// Full reports high water: h is at or over a bound.
func (w Window) Full(h Held) bool {
	w = w.withDefaults()
	return h.Bytes >= w.MaxBytes || (w.MaxRows > 0 && h.Rows >= w.MaxRows)
}

// Low reports low water: h is strictly below ResumeAt of every bound.
func (w Window) Low(h Held) bool {
	w = w.withDefaults()
	if !(float64(h.Bytes) < float64(w.MaxBytes)*w.ResumeAt) {
		return false
	}
	return w.MaxRows == 0 || float64(h.Rows) < float64(w.MaxRows)*w.ResumeAt
}

// Start returns whether an inbox holding h starts paused: exactly when it
// is full.
func (w Window) Start(h Held) bool { return w.Full(h) }

// Next returns the pause state after the held rows became h, from the state
// paused: an active inbox pauses at high water, a paused one resumes only
// at low water, and in the band between it keeps the state it had.
func (w Window) Next(paused bool, h Held) bool {
	if paused {
		return !w.Low(h)
	}
	return w.Full(h)
}

// Take reports whether an active inbox holding h takes one more row: while
// it is not full. A row is counted once it is taken, so the row that
// crosses the byte bound is the last one taken, and an empty inbox always
// takes one row, however large (no positive bound is full at zero).
func (w Window) Take(h Held) bool { return !w.Full(h) }
