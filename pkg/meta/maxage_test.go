package meta

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseReadsEachUnitAndCompounds(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90s":      90 * time.Second,
		"15m":      15 * time.Minute,
		"12h":      12 * time.Hour,
		"30d":      30 * 24 * time.Hour,
		"2w":       14 * 24 * time.Hour,
		"1w3d":     10 * 24 * time.Hour,
		"1h30m":    90 * time.Minute,
		"1d2h3m4s": 26*time.Hour + 3*time.Minute + 4*time.Second,
		"007d":     7 * 24 * time.Hour,
	} {
		got, err := ParseMaxAge(in)
		if err != nil || got != want {
			t.Errorf("ParseMaxAge(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestParseRefusesWhatIsNotAWindow(t *testing.T) {
	for in, says := range map[string]string{
		"":                       "empty",
		"30":                     "without a unit",
		"1.5h":                   `unit "."`,
		"-1d":                    `"-1d" where a number`,
		"+1d":                    "where a number",
		" 1d":                    "where a number",
		"1d ":                    "where a number",
		"10ms":                   `"s" where a number`,
		"1y":                     `unit "y"`,
		"1D":                     `unit "D"`,
		"1h1d":                   "out of order",
		"1h1h":                   "out of order",
		"0d":                     "zero",
		"0s0m":                   "out of order",
		"0h0m":                   "zero",
		"none":                   "where a number",
		"h":                      "where a number",
		"99999999999w":           "too long",
		"999999999999999999999s": "too long",
	} {
		_, err := ParseMaxAge(in)
		if err == nil {
			t.Errorf("ParseMaxAge(%q) took it; want a refusal", in)
			continue
		}
		if !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "such as 30d") && in != "" {
			t.Errorf("ParseMaxAge(%q): %v; want it to say %q and show the form", in, err, says)
		}
	}
}

// FuzzParse checks that no input panics, that every accepted window
// is positive, and that an accepted one reads the same with its parts
// summed in seconds.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"30d", "1w3d", "1h30m", "90s", "0d", "1.5h", "-1d", "1y", "99999999999w", "none", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseMaxAge(s)
		if err != nil {
			if d != 0 {
				t.Fatalf("ParseMaxAge(%q) refused it but returned %v", s, d)
			}
			return
		}
		if d <= 0 {
			t.Fatalf("ParseMaxAge(%q) = %v, not positive", s, d)
		}
		if d%time.Second != 0 {
			t.Fatalf("ParseMaxAge(%q) = %v, not whole seconds", s, d)
		}
		again, err := ParseMaxAge(fmt.Sprintf("%ds", int64(d/time.Second)))
		if err == nil && again != d {
			t.Fatalf("ParseMaxAge(%q) = %v, but %ds reads %v", s, d, int64(d/time.Second), again)
		}
	})
}
