package jsontext

import (
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

func TestExactIntReadsIntegralNumbersExactly(t *testing.T) {
	cases := []struct {
		tok  string
		want int64
		prob IntProblem
	}{
		{"0", 0, IntOK}, {"-0", 0, IntOK}, {"7", 7, IntOK}, {"-7", -7, IntOK},
		{"123456789012345678", 123456789012345678, IntOK},
		{"9223372036854775807", math.MaxInt64, IntOK},
		{"-9223372036854775808", math.MinInt64, IntOK},
		{"9223372036854775808", 0, IntRange},
		{"-9223372036854775809", 0, IntRange},
		{"1.0", 1, IntOK}, {"1.000000000000000000000000000000", 1, IntOK},
		{"1e3", 1000, IntOK}, {"1E+3", 1000, IntOK}, {"1000e-3", 1, IntOK},
		{"0.5e1", 5, IntOK}, {"12.5e1", 125, IntOK},
		{"9.223372036854775807e18", math.MaxInt64, IntOK},
		{"1.5", 0, IntFraction}, {"1e-1", 0, IntFraction}, {"0.1", 0, IntFraction},
		{"1e19", 0, IntRange}, {"1e999999999999", 0, IntRange}, {"1e-999999999999", 0, IntFraction},
		{"0e999999999999", 0, IntOK}, {"0.000", 0, IntOK},
	}
	for _, tc := range cases {
		got, prob := ExactInt([]byte(tc.tok))
		if got != tc.want || prob != tc.prob {
			t.Errorf("ExactInt(%s) = %d, %d; want %d, %d", tc.tok, got, prob, tc.want, tc.prob)
		}
	}
}

// TestFloatFastPathsMatchStrconv checks the shortcuts of the float codec
// against strconv on many values: formatting (appendShort64/32), reading
// canonical tokens (parseShortFloat), and copying publisher tokens that are
// already canonical (CanonicalFloatToken).
func TestFloatFastPathsMatchStrconv(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	reference := func(f float64, bits int) string {
		abs := math.Abs(f)
		if f == 0 {
			if math.Signbit(f) {
				return "-0.0"
			}
			return "0.0"
		}
		small, large := abs < 1e-6, abs >= 1e21
		if bits == 32 {
			small, large = float32(abs) < float32(1e-6), float32(abs) >= float32(1e21)
		}
		if small || large {
			s := strconv.FormatFloat(f, 'e', -1, bits)
			if i := strings.Index(s, "e"); i >= 0 && len(s) >= i+4 && s[i+2] == '0' {
				s = s[:i+2] + s[i+3:]
			}
			return s
		}
		s := strconv.FormatFloat(f, 'f', -1, bits)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	n := 300000
	if testing.Short() {
		n = 30000
	}
	for i := 0; i < n; i++ {
		var f float64
		switch i % 6 {
		case 0:
			f = rng.Float64() * 1e6
		case 1:
			f = float64(rng.Int63n(1e12)) / math.Pow10(rng.Intn(12))
		case 2:
			f = rng.NormFloat64() * math.Pow10(rng.Intn(40)-20)
		case 3:
			f, _ = strconv.ParseFloat(strconv.FormatFloat(rng.Float64()*10, 'f', rng.Intn(16), 64), 64)
		case 4:
			f = math.Float64frombits(rng.Uint64())
		default:
			f = float64(rng.Int63n(1<<53)) * math.Pow10(rng.Intn(10)-5)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		if got, want := string(AppendFloat64(nil, f)), reference(f, 64); got != want {
			t.Fatalf("AppendFloat64(%v) = %s, want %s", f, got, want)
		}
		f32 := float32(f)
		if !math.IsInf(float64(f32), 0) {
			if got, want := string(AppendFloat32(nil, f32)), reference(float64(f32), 32); got != want {
				t.Fatalf("AppendFloat32(%v) = %s, want %s", f32, got, want)
			}
		}
		for _, bits := range []int{64, 32} {
			tok := []byte(strconv.FormatFloat(f, 'f', rng.Intn(18)-1, bits))
			want, err := strconv.ParseFloat(string(tok), bits)
			if err != nil {
				continue
			}
			if got, ok := parseShortFloat(tok, bits); ok && math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("parseShortFloat(%s, %d) = %v, want %v", tok, bits, got, want)
			}
			digits := 15
			if bits == 32 {
				digits = 6
			}
			if dot, ok := CanonicalFloatToken(tok, digits); ok {
				got := string(tok)
				if dot {
					got += ".0"
				}
				if w := reference(want, bits); got != w {
					t.Fatalf("CanonicalFloatToken(%s, %d) says canonical, but the canonical form is %s", tok, bits, w)
				}
			}
		}
	}
}
