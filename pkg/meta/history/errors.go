package history

import "errors"

// Why a Reader refused: Refusal.Why.
const (
	// WhyNoTier: the rows asked for are in no published file, and no
	// broker was asked for them.
	WhyNoTier = "no_tier"
	// WhyBelowFloor: the rows asked for are below the stream's retention
	// floor.
	WhyBelowFloor = "below_floor"
	// WhyStreamID: the metadata names another stream_id than the one
	// expected.
	WhyStreamID = "stream_id"
	// WhyShortTable: a sealed or retired log's table holds fewer rows
	// than the log had when it was closed.
	WhyShortTable = "short_table"
	// WhyUnpublished: the fixed point lies past what is published, and
	// no broker was given to read the rest from.
	WhyUnpublished = "unpublished"
	// WhyMaxTail: the rows past the published end exceed MaxTail.
	WhyMaxTail = "max_tail"
	// WhyDamaged: a published file the pinned snapshot lists is missing
	// from storage while the table still lists it, or holds other offsets
	// than its manifest entry records (replaced or damaged after it was
	// published).
	WhyDamaged = "damaged_file"
)

// Refusal is a read the Reader will not answer short (I6,
// docs/design.md): Msg names the numbers and the way out.
type Refusal struct {
	Why string
	Msg string
}

// Error returns Msg.
func (e *Refusal) Error() string { return e.Msg }

// IsRefusal reports whether err is (or wraps) a Refusal with one of the
// given reasons (any reason when none is given).
func IsRefusal(err error, why ...string) bool {
	var r *Refusal
	if !errors.As(err, &r) {
		return false
	}
	if len(why) == 0 {
		return true
	}
	for _, w := range why {
		if r.Why == w {
			return true
		}
	}
	return false
}
