package control

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzMutationHeaders: no header value panics the checks, a key they
// accept is 1–128 printable ASCII characters without a space, and a cursor
// that parses is one makeCursor makes the same.
func FuzzMutationHeaders(f *testing.F) {
	for _, s := range []string{"k", "", " ", "a b", strings.Repeat("k", 129), "\x7f", "é", `"1"`, `W/"1"`, "*", "application/json; charset=utf-8", "text/plain", makeCursor(7, "trades")} {
		f.Add(s, s, s)
	}
	f.Fuzz(func(t *testing.T, key, match, ct string) {
		if k, rf := checkIdempotencyKey([]string{key}); rf == nil {
			if len(k) < 1 || len(k) > 128 || strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
				t.Fatalf("key %q accepted", k)
			}
		} else if rf.status != http.StatusBadRequest {
			t.Fatalf("key %q: status %d; want 400", key, rf.status)
		}
		_, _, _ = checkPreconditions([]string{match}, nil)
		_, _, _ = checkPreconditions(nil, []string{match})
		_ = checkContentType(ct)
		if rev, last, ok := parseCursor(match); ok {
			if again, last2, ok2 := parseCursor(makeCursor(rev, last)); !ok2 || again != rev || last2 != last {
				t.Fatalf("cursor %q reads as (%d, %q), whose own cursor reads as (%d, %q, %v)", match, rev, last, again, last2, ok2)
			}
		}
	})
}
