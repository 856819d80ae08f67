// A published location: the prefix a log's Iceberg table is published
// under, an s3:// bucket and path or a local directory, and the one parser
// every caller reads it with (config, a log's stored config, command
// lines). It is a value and its grammar; this file opens nothing.

package warehouse

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// Location is a parsed published location: the prefix a log's Iceberg
// table is published under. Exactly one of S3 and Dir is set, or neither
// for the zero Location, which stands for "no location given".
type Location struct {
	// S3 is an s3://bucket/path URL without a trailing slash.
	S3 string
	// Dir is an absolute, cleaned local directory.
	Dir string
}

// IsZero reports whether l is the zero Location (no location given).
func (l Location) IsZero() bool { return l.S3 == "" && l.Dir == "" }

// String returns l in the form Parse reads back to l: the s3://
// URL or the directory; "" for the zero Location.
func (l Location) String() string {
	if l.S3 != "" {
		return l.S3
	}
	return l.Dir
}

// Join returns the location of elem under l: an s3:// URL or a
// directory. It is how a table's place under a prefix is spelled; the
// layout (which elements) belongs to the caller.
func (l Location) Join(elem ...string) string {
	if l.S3 != "" {
		return strings.Join(append([]string{l.S3}, elem...), "/")
	}
	return filepath.Join(append([]string{l.Dir}, elem...)...)
}

// SplitS3 returns the bucket of an s3:// location and the key prefix
// below it, without a leading or trailing '/' ("" for the bucket itself);
// both are "" for a directory or the zero Location.
func (l Location) SplitS3() (bucket, prefix string) {
	if l.S3 == "" {
		return "", ""
	}
	bucket, prefix, _ = strings.Cut(strings.TrimPrefix(l.S3, "s3://"), "/")
	return bucket, strings.Trim(prefix, "/")
}

// Parent is the inverse of Join: the p with p.Join(elem...) == l's
// String. It reports false when l does not end in elem, when elem is
// empty, or when p would be no location (the file system's root, or an
// s3:// URL without a bucket).
func (l Location) Parent(elem ...string) (Location, bool) {
	if len(elem) == 0 {
		return Location{}, false
	}
	var p Location
	switch {
	case l.S3 != "":
		s, ok := strings.CutSuffix(l.S3, "/"+strings.Join(elem, "/"))
		bucket, _, _ := strings.Cut(strings.TrimPrefix(s, "s3://"), "/")
		if !ok || !strings.HasPrefix(s, "s3://") || bucket == "" || strings.HasSuffix(s, "/") {
			return Location{}, false
		}
		p.S3 = s
	case l.Dir != "":
		s, ok := strings.CutSuffix(l.Dir, string(filepath.Separator)+filepath.Join(elem...))
		if !ok || s == "" || s == filepath.Dir(s) {
			return Location{}, false
		}
		p.Dir = s
	default:
		return Location{}, false
	}
	if p.Join(elem...) != l.String() {
		return Location{}, false // elem held "..", "." or an empty element
	}
	return p, true
}

// ErrCredentials is wrapped by Parse's error for an
// s3:// URL that carries a user or password: credentials never go into a
// location (it is stored in the log and printed in messages).
var ErrCredentials = errors.New("the location names credentials in its URL")

// Parse parses a published location, the one parser every caller
// uses (config, stored log config, command lines):
//
//   - s3://bucket/path: the bucket is required; a trailing slash is dropped;
//     a user or password, a query or a fragment is refused;
//   - file:///absolute/dir (or file://localhost/absolute/dir): that directory;
//   - a directory, absolute or relative; a relative one is resolved against
//     base, or against the working directory when base is "";
//   - "": the zero Location (the caller's default applies).
//
// Any other scheme, a "~" (never expanded), a file:// URL with a host,
// query or fragment, and the file system's root are refused. The error
// names the value, except for an s3:// URL that does not parse, which may
// hold a secret.
func Parse(s, base string) (Location, error) {
	bad := func(why string) (Location, error) {
		return Location{}, fmt.Errorf("location %s; give s3://bucket/path, file:///absolute/dir or a directory", why)
	}
	var dir string
	switch {
	case s == "":
		return Location{}, nil
	case strings.HasPrefix(s, "s3://"):
		u, err := url.Parse(s)
		switch {
		case err != nil:
			return bad("is not a valid s3:// URL") // not echoed: it may hold a secret
		case u.User != nil:
			return Location{}, fmt.Errorf("%w; credentials come from the standard AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or a profile (AWS_PROFILE), never from a location", ErrCredentials)
		case u.Host == "":
			return bad(fmt.Sprintf("%q names no bucket", s))
		case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#"):
			return bad(fmt.Sprintf("%q has a query or fragment", s))
		}
		return Location{S3: strings.TrimRight(s, "/")}, nil
	case strings.HasPrefix(s, "file://"):
		u, err := url.Parse(s)
		if err != nil || (u.Host != "" && u.Host != "localhost") || !strings.HasPrefix(u.Path, "/") ||
			u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#") {
			return bad(fmt.Sprintf("%q is not a file:// URL of an absolute directory (such as file:///srv/published)", s))
		}
		dir = filepath.FromSlash(u.Path)
	case strings.Contains(s, "://"):
		scheme, _, _ := strings.Cut(s, "://")
		return bad(fmt.Sprintf("%q has scheme %s://, which streamcast cannot publish to", s, scheme))
	case strings.HasPrefix(s, "~"):
		return bad(fmt.Sprintf("%q starts with ~, which is not expanded", s))
	default:
		dir = s
	}
	if !filepath.IsAbs(dir) && base != "" {
		dir = filepath.Join(base, dir)
	}
	if strings.ContainsRune(dir, 0) {
		return bad(fmt.Sprintf("%q holds a NUL byte (in itself or in the directory it is relative to)", s))
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return bad(fmt.Sprintf("%q cannot be made absolute: %v", s, err))
	}
	if abs == filepath.Dir(abs) {
		return bad(fmt.Sprintf("%q is the root directory", s))
	}
	return Location{Dir: abs}, nil
}
