// A stream's retention window as the retain command and a stream's
// metadata spell it ("30d", "1w3d", "none") and its one parser,
// ParseMaxAge.

package meta

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// MaxAgeNone is how the retain command spells "no retention window": the
// stream keeps every row from then on (what retention already deleted
// stays deleted).
const MaxAgeNone = "none"

// units are the units a max age takes, largest first: a compound
// age ("1w3d") names them in this order, each at most once.
var units = []struct {
	unit byte
	d    time.Duration
}{
	{'w', 7 * 24 * time.Hour},
	{'d', 24 * time.Hour},
	{'h', time.Hour},
	{'m', time.Minute},
	{'s', time.Second},
}

// Parse reads a retention window as the retain command takes it: a
// positive whole number and a unit, s (seconds), m (minutes), h (hours),
// d (days of 24 hours) or w (weeks of 7 days), such as "30d"; or several
// such parts, largest unit first, each unit once ("1w3d", "1h30m"). It
// refuses anything else (fractions, signs, spaces, ms, a missing unit, a
// window of zero, one past about 290 years) with a message that shows the
// form; "none" is not a duration here (see MaxAgeNone).
func ParseMaxAge(s string) (time.Duration, error) {
	const form = "give a whole number and a unit: s, m, h, d (24h) or w (7d), such as 30d, 12h or 1w3d"
	bad := func(why string) error {
		return fmt.Errorf("max age %q %s; %s", clipMaxAge(s, 40), why, form)
	}
	if s == "" {
		return 0, errors.New("max age is empty; " + form + ", or none to keep every row")
	}
	var total time.Duration
	next := 0 // index into units: a part's unit may not come before it
	for rest := s; rest != ""; {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, bad(fmt.Sprintf("has %q where a number should be", clipMaxAge(rest, 10)))
		}
		if i == len(rest) {
			return 0, bad(fmt.Sprintf("ends with %s, a number without a unit", rest))
		}
		digits, unit := rest[:i], rest[i]
		rest = rest[i+1:]
		k := -1
		for j, u := range units {
			if u.unit == unit {
				k = j
			}
		}
		switch {
		case k < 0:
			return 0, bad(fmt.Sprintf("has the unit %q, which is not one of s, m, h, d, w", string(unit)))
		case k < next:
			return 0, bad(fmt.Sprintf("has its %c part out of order or twice; name each unit once, largest first", unit))
		}
		next = k + 1
		var n int64
		for _, c := range digits {
			if n > (math.MaxInt64-9)/10 {
				return 0, bad("is too long; the longest window is about 290 years")
			}
			n = n*10 + int64(c-'0')
		}
		d := units[k].d
		if n > int64(math.MaxInt64-total)/int64(d) {
			return 0, bad("is too long; the longest window is about 290 years")
		}
		total += time.Duration(n) * d
	}
	if total <= 0 {
		return 0, bad("is zero, which would delete every row at once; give a positive window")
	}
	return total, nil
}

// clip shortens s to n bytes for a message, marking the cut.
func clipMaxAge(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
