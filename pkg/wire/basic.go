package wire

// HTTP Basic credentials (RFC 7617), both ways: the client's header value
// and the server's parse of it, in one place so the two cannot disagree.

import (
	"encoding/base64"
	"net/url"
	"strings"
)

// BasicAuthorization is the Authorization header value that sends cred
// with HTTP Basic authentication (RFC 7617): base64 of "user:password".
func BasicAuthorization(cred *url.Userinfo) string {
	pw, _ := cred.Password()
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(cred.Username()+":"+pw))
}

// maxHeaderCredentials bounds the Authorization value decoded: a user name
// and a password of any sensible length fit many times over, and bcrypt
// reads only 72 bytes of a password anyway.
const maxHeaderCredentials = 4096

// ParseBasic reads an Authorization header value of the Basic scheme
// (RFC 7617), as the server checks what BasicAuthorization sends: the
// scheme name in any case, one or more spaces, then base64 of
// "user:password". ok is false for any other scheme, for bad
// base64, for a decoded value without a colon or over 4 KiB, and for an
// empty user name. The password may be empty and may contain colons; the
// user name cannot.
func ParseBasic(header string) (user, password string, ok bool) {
	scheme, rest, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	rest = strings.TrimLeft(rest, " ")
	if rest == "" || base64.StdEncoding.DecodedLen(len(rest)) > maxHeaderCredentials {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return "", "", false
	}
	user, password, found = strings.Cut(string(raw), ":")
	if !found || user == "" {
		return "", "", false
	}
	return user, password, true
}
