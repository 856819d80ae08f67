package jsontext

import (
	"math"
	"strconv"
)

// The canonical text of floats. Decode and AppendJSON both go through
// AppendFloat, so a float prints the same live and on replay (I4); the fast
// paths below are exact, and TestFloatFastPathsMatchStrconv checks them
// against strconv.

// AppendFloat64 writes f in the canonical form: the shortest decimal that
// parses back to f, in plain notation with a ".0" kept when integral
// (85565.0, 0.001, -0.0) for 1e-6 <= |f| < 1e21, and in exponent notation
// otherwise (1e+21, 1.5e-7: mantissa as short as possible, exponent signed
// and without leading zeros), the thresholds JavaScript and Go's
// encoding/json use. Non-finite values have no JSON form and are written as
// null; Decode never produces them.
func AppendFloat64(dst []byte, f float64) []byte {
	return AppendFloat(dst, f, 64)
}

// AppendFloat32 is AppendFloat64 for a float32 column: the shortest decimal
// that parses back to the same float32.
func AppendFloat32(dst []byte, f float32) []byte {
	return AppendFloat(dst, float64(f), 32)
}

// AppendFloat writes f in the canonical form of a float of the given bits
// (32 or 64): AppendFloat64 and AppendFloat32 for a bit size known only at
// run time.
func AppendFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	abs := math.Abs(f)
	// The notation thresholds apply to the value in its own width, so a
	// float32 column writes float32(0.000001) plainly, as it was given.
	small, large := abs < 1e-6, abs >= 1e21
	if bits == 32 {
		small, large = float32(abs) < float32(1e-6), float32(abs) >= float32(1e21)
	}
	if !small {
		if bits == 64 && abs < 1e15 {
			if out, ok := appendShort64(dst, f); ok {
				return out
			}
		} else if bits == 32 && abs < 1e6 {
			if out, ok := appendShort32(dst, float32(f)); ok {
				return out
			}
		}
	}
	if small || large {
		n := len(dst)
		dst = strconv.AppendFloat(dst, f, 'e', -1, bits)
		// strconv writes e-07; clean up to e-7 (as encoding/json does).
		if m := len(dst) - n; m >= 4 && dst[len(dst)-4] == 'e' && dst[len(dst)-2] == '0' {
			dst[len(dst)-2] = dst[len(dst)-1]
			dst = dst[:len(dst)-1]
		}
		return dst
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, bits)
	for _, c := range dst[n:] {
		if c == '.' {
			return dst
		}
	}
	return append(dst, '.', '0')
}

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// appendShort64 is the fast path of AppendFloat for 1e-6 <= |f| < 1e15.
// It scales |f| by the largest 10^K that keeps m = |f|·10^K below 10^15,
// rounds to r, drops r's trailing zeros (k decimals remain) and accepts the
// decimal r/10^k if dividing gives back f exactly.
//
// Why that is strconv's shortest form: below 10^15 the rounding error of m
// is under 0.11, and a float's neighbours are closer than 10^-K, so if any
// decimal of at most 15 significant digits parses to f, r is exactly that
// decimal scaled; r/10^k is one correctly rounded division of exact
// doubles, i.e. what parsing the decimal returns. Decimals of at most 15
// significant digits map to distinct doubles (DBL_DIG), so the one found is
// the only, hence the shortest, round-trip form. Values that need 16 or 17
// digits fail the check and fall through to strconv.
func appendShort64(dst []byte, f float64) ([]byte, bool) {
	a := math.Abs(f)
	// Estimate the decimal exponent from the binary one, then correct.
	e2 := int(math.Float64bits(a)>>52&0x7ff) - 1023
	K := 14 - (e2*78913)>>18 // 78913/2^18 ≈ log10(2)
	if K < 0 {
		K = 0
	}
	if K >= len(pow10) {
		K = len(pow10) - 1
	}
	m := a * pow10[K]
	for m >= 1e15 && K > 0 {
		K--
		m = a * pow10[K]
	}
	for K+1 < len(pow10) && a*pow10[K+1] < 1e15 {
		K++
		m = a * pow10[K]
	}
	if m >= 1e15 {
		return dst, false
	}
	r := uint64(m + 0.5) // m < 2^50: m+0.5 is exact and truncation rounds half up
	k := K
	if k >= 8 && r%1e8 == 0 {
		r /= 1e8
		k -= 8
	}
	if k >= 4 && r%1e4 == 0 {
		r /= 1e4
		k -= 4
	}
	if k >= 2 && r%100 == 0 {
		r /= 100
		k -= 2
	}
	if k >= 1 && r%10 == 0 {
		r /= 10
		k--
	}
	if float64(r)/pow10[k] != a {
		return dst, false
	}
	return appendDecimal(dst, f < 0, r, k), true
}

// appendShort32 is appendShort64 for float32 (FLT_DIG is 6): r < 10^6 and
// 10^k are exact float32s, and the float32 division is correctly rounded.
func appendShort32(dst []byte, f float32) ([]byte, bool) {
	a := float32(math.Abs(float64(f)))
	for k := 0; k <= 6; k++ {
		m := float64(a) * pow10[k] // exact: 24-bit mantissa times 10^k fits in 53 bits
		if m >= 1e6 {
			return dst, false
		}
		r := float64(int64(m + 0.5))
		if float32(r)/float32(pow10[k]) == a {
			return appendDecimal(dst, f < 0, uint64(r), k), true
		}
	}
	return dst, false
}

// appendDecimal writes ±r/10^k with exactly k decimals (at least one),
// r < 10^15.
func appendDecimal(dst []byte, neg bool, r uint64, k int) []byte {
	var buf [24]byte
	i := len(buf)
	if k == 0 {
		i--
		buf[i] = '0'
		i--
		buf[i] = '.'
	}
	for n := 0; ; n++ {
		i--
		buf[i] = byte('0' + r%10)
		r /= 10
		if n+1 == k {
			i--
			buf[i] = '.'
			if r == 0 {
				i--
				buf[i] = '0'
				break
			}
			continue
		}
		if r == 0 && n+1 > k {
			break
		}
	}
	if neg {
		i--
		buf[i] = '-'
	}
	return append(dst, buf[i:]...)
}

// CanonicalFloatToken reports whether a well-formed JSON number token is
// already the canonical form of the float it parses to, save a ".0" that
// dot says to add. That holds for plain decimals (no exponent, no trailing
// fraction zeros, |x| >= 1e-6) with at most maxDigits significant digits
// (15 for float64, 6 for float32): such decimals map to distinct floats, so
// the token is the shortest round-trip form. The decoder then copies the
// token instead of parsing and formatting it.
func CanonicalFloatToken(tok []byte, maxDigits int) (dot, ok bool) {
	i := 0
	if tok[0] == '-' {
		i = 1
	}
	intStart := i
	for i < len(tok) && IsDigit(tok[i]) {
		i++
	}
	nInt := i - intStart
	if i == len(tok) {
		return true, nInt <= maxDigits
	}
	if tok[i] != '.' {
		return false, false
	}
	i++
	fracStart := i
	for i < len(tok) && IsDigit(tok[i]) {
		i++
	}
	if i != len(tok) || tok[len(tok)-1] == '0' {
		return false, false
	}
	sig := nInt + i - fracStart
	if nInt == 1 && tok[intStart] == '0' {
		z := 0
		for tok[fracStart+z] == '0' {
			z++
		}
		if z > 5 {
			return false, false
		}
		sig = i - fracStart - z
	}
	return false, sig <= maxDigits
}

// parseShortFloat parses a plain decimal token (no exponent) of at most 15
// digits (7 for float32) exactly as strconv would: the digits form an
// integer that the float type holds exactly, 10^k is exact too, and one
// IEEE division rounds correctly (Clinger's fast path). Canonical floats are
// nearly always of this shape.
func parseShortFloat(tok []byte, bits int) (float64, bool) {
	f, n, ok := ParseShortFloatPrefix(tok, bits)
	return f, ok && n == len(tok)
}

// ParseShortFloatPrefix is parseShortFloat on the number at the start of
// data, returning its length; ok is false when the number is not short and
// plain (then the caller takes the strconv path).
func ParseShortFloatPrefix(data []byte, bits int) (f float64, n int, ok bool) {
	i := 0
	neg := false
	if len(data) > 0 && data[0] == '-' {
		neg, i = true, 1
	}
	var mant uint64
	digits, k := 0, -1
loop:
	for ; i < len(data); i++ {
		c := data[i]
		switch {
		case IsDigit(c):
			mant = mant*10 + uint64(c-'0')
			digits++
			if k >= 0 {
				k++
			}
		case c == '.' && k < 0:
			k = 0
		case c == 'e' || c == 'E' || c == '+' || c == '-' || c == '.':
			return 0, 0, false
		default:
			break loop
		}
	}
	if digits == 0 || k == 0 {
		return 0, 0, false
	}
	if k < 0 {
		k = 0
	}
	if bits == 32 {
		if digits > 7 || k > 10 {
			return 0, 0, false
		}
		f = float64(float32(mant) / float32(pow10[k]))
	} else {
		if digits > 15 || k >= len(pow10) {
			return 0, 0, false
		}
		f = float64(mant) / pow10[k]
	}
	if neg {
		f = -f
	}
	return f, i, true
}
