package control

// What a control API request carries beside its body: the headers of a
// mutation (Content-Type, Idempotency-Key, If-Match, If-None-Match) and
// the cursor of a list page. Each check answers with the status and code
// the API refuses with.

import (
	"encoding/base64"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// checkContentType refuses a mutation that is not application/json (415).
func checkContentType(ct string) *apiError {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return refuse(http.StatusUnsupportedMediaType, "unsupported_media_type", "a mutation's body is JSON: send Content-Type: application/json")
	}
	return nil
}

// checkIdempotencyKey returns the request's one Idempotency-Key, given its
// values: missing is 428, and more than one, an empty one, one over 128
// characters or one with a character outside printable ASCII (or a space)
// is 400.
func checkIdempotencyKey(values []string) (string, *apiError) {
	switch {
	case len(values) == 0:
		return "", refuse(http.StatusPreconditionRequired, "idempotency_key_required", "a mutation needs an Idempotency-Key header (1 to 128 printable ASCII characters, no spaces); reuse it when you retry")
	case len(values) > 1:
		return "", refuse(http.StatusBadRequest, "bad_idempotency_key", "give one Idempotency-Key header, not %d", len(values))
	}
	k := values[0]
	if len(k) < 1 || len(k) > 128 {
		return "", refuse(http.StatusBadRequest, "bad_idempotency_key", "the Idempotency-Key is %d characters; give 1 to 128", len(k))
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= 0x20 || k[i] >= 0x7f {
			return "", refuse(http.StatusBadRequest, "bad_idempotency_key", "the Idempotency-Key has a character outside printable ASCII, or a space, at byte %d", i)
		}
	}
	return k, nil
}

// checkPreconditions reads If-Match (one quoted decimal revision, returned as
// given for the caller to compare with the stream's ETag) and
// If-None-Match (only *). Both at once, or either given twice, is 400; an
// If-None-Match other than * is 412.
func checkPreconditions(ifMatch, ifNone []string) (match string, none bool, err *apiError) {
	switch {
	case len(ifMatch) > 0 && len(ifNone) > 0:
		return "", false, refuse(http.StatusBadRequest, "bad_precondition", "give If-Match or If-None-Match, not both")
	case len(ifMatch) > 1 || len(ifNone) > 1:
		return "", false, refuse(http.StatusBadRequest, "bad_precondition", "give a precondition header once")
	case len(ifNone) == 1:
		if strings.TrimSpace(ifNone[0]) != "*" {
			return "", false, refuse(http.StatusPreconditionFailed, "precondition_failed", "If-None-Match takes only *, to create a stream that does not exist")
		}
		return "", true, nil
	case len(ifMatch) == 1:
		return strings.TrimSpace(ifMatch[0]), false, nil
	}
	return "", false, nil
}

// makeCursor is the cursor of the list page after the stream named last,
// at the registry's revision rev; parseCursor reads it back.
func makeCursor(rev int64, last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(rev, 10) + ":" + last))
}

// parseCursor reads a cursor makeCursor made; ok is false for anything
// else.
func parseCursor(s string) (rev int64, last string, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, "", false
	}
	revs, last, ok := strings.Cut(string(b), ":")
	rev, err = strconv.ParseInt(revs, 10, 64)
	if !ok || err != nil || rev < 0 {
		return 0, "", false
	}
	return rev, last, true
}
