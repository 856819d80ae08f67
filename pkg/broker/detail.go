package broker

import (
	"path"
	"regexp"
	"strings"
)

// absPath finds an absolute path on this machine inside an error's text:
// a run of characters that are no separator, starting with '/' (or a
// file:// URL) at the start of the text or after a space, quote,
// parenthesis or '='. An s3:// URL is no path on this machine and stays.
var absPath = regexp.MustCompile(`(^|[\s("'=])(file://)?/[^\s:;,()"']*`)

// publicDetail is err's message as it may be sent to a client: every
// absolute path is cut to its last element. The server's log keeps the
// whole message for the operator; a publisher learns what failed ("append
// 20 rows to log t at offset 7: database or disk is full"), never where
// the server keeps its files, which is none of its business and helps an
// attacker.
func publicDetail(err error) string {
	return absPath.ReplaceAllStringFunc(err.Error(), func(m string) string {
		i := strings.IndexByte(m, '/')
		if j := strings.Index(m, "file://"); j >= 0 {
			i = j
		}
		base := path.Base(strings.TrimRight(strings.TrimPrefix(m[i:], "file://"), "/"))
		if base == "." || base == "/" {
			base = "…"
		}
		return m[:i] + base
	})
}
