package source

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNumberTextIsJSONsNumberGrammar: the hand-written check of a CSV
// number cell accepts exactly what the check before it did: text of
// number characters only (no spaces) that encoding/json finds valid.
func TestNumberTextIsJSONsNumberGrammar(t *testing.T) {
	cells := []string{
		"0", "-0", "7", "-7", "10", "60000.25", "1e9", "1E+9", "1e-9", "-1.5e-3", "0.5", "123456789012345678901234567890",
		"", "-", "+1", "01", "-01", "00", ".5", "5.", "1.e3", "1e", "1e+", "1e+-3", "--1", "1-", "1.2.3", "0x10",
		"1 ", " 1", "NaN", "Infinity", "-Infinity", "1,5", "1e3.5", "١", "0e0", "-0.0E-0",
	}
	for _, c := range cells {
		want := strings.Trim(c, "0123456789-+.eE") == "" && json.Valid([]byte(c))
		if got := numberText(c); got != want {
			t.Errorf("numberText(%q) = %v, want %v", c, got, want)
		}
	}
}
