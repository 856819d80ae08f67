package warehouse

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseReadsEveryForm covers each form a published location
// takes, and the cases a reader could get wrong: a relative directory
// (resolved against base), an s3:// URL with credentials (refused, never
// stored), and errors echoing a value that may hold a secret.
func TestParseReadsEveryForm(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, in, base string
		want           Location
	}{
		{"empty is the zero location", "", "", Location{}},
		{"s3 bucket", "s3://bucket", "", Location{S3: "s3://bucket"}},
		{"s3 path", "s3://bucket/some/path", "", Location{S3: "s3://bucket/some/path"}},
		{"s3 trailing slashes dropped", "s3://bucket/p//", "", Location{S3: "s3://bucket/p"}},
		{"file URL", "file:///srv/pub", "", Location{Dir: "/srv/pub"}},
		{"file URL trailing slash", "file:///srv/pub/", "", Location{Dir: "/srv/pub"}},
		{"file URL on localhost", "file://localhost/srv/pub", "", Location{Dir: "/srv/pub"}},
		{"file URL cleaned", "file:///srv/./a/../pub", "", Location{Dir: "/srv/pub"}},
		{"absolute directory", "/srv/pub", "", Location{Dir: "/srv/pub"}},
		{"absolute directory ignores base", "/srv/pub", "/elsewhere", Location{Dir: "/srv/pub"}},
		{"relative directory against the working directory (parsePublished took it, parsePrefix refused it)", "pub/tables", "", Location{Dir: filepath.Join(wd, "pub", "tables")}},
		{"relative directory against a base", "../../published", "/data/root/trades/trades", Location{Dir: "/data/root/published"}},
		{"dot-dot from a relative base", "../published", "rel/x", Location{Dir: filepath.Join(wd, "rel", "published")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in, tc.base)
			if err != nil || got != tc.want {
				t.Fatalf("Parse(%q, %q) = %+v, %v; want %+v", tc.in, tc.base, got, err, tc.want)
			}
			// What String gives back parses to the same place.
			again, err := Parse(got.String(), "/unused")
			if err != nil || again != got {
				t.Fatalf("Parse(%q) = %+v, %v; want it to read back as %+v", got.String(), again, err, got)
			}
		})
	}
}

func TestParseRefusals(t *testing.T) {
	const secret = "wJalrXUtnFEMI-K7MDENG"
	cases := []struct{ name, in, want string }{
		{"credentials in an s3 URL (parsePrefix accepted them)", "s3://AKIA:" + secret + "@bucket/p", "names credentials"},
		{"user in an s3 URL", "s3://AKIA@bucket/p", "names credentials"},
		{"s3 URL that does not parse, not echoed", "s3://AKIA:" + secret + "@bu%zzcket/p", "is not a valid s3:// URL"},
		{"no bucket", "s3:///p", "names no bucket"},
		{"bare s3", "s3://", "names no bucket"},
		{"s3 query", "s3://bucket/p?x=1", "has a query or fragment"},
		{"s3 empty query", "s3://bucket/p?", "has a query or fragment"},
		{"s3 fragment", "s3://bucket/p#x", "has a query or fragment"},
		{"another scheme", "gs://bucket/p", "has scheme gs://, which streamcast cannot publish to"},
		{"upper-case scheme", "S3://bucket/p", "has scheme S3://"},
		{"relative file URL", "file://pub", "is not a file:// URL of an absolute directory"},
		{"file URL with a host", "file://host/srv/pub", "is not a file:// URL of an absolute directory"},
		{"file URL with a query (both parsers ignored it)", "file:///srv/pub?x=1", "is not a file:// URL of an absolute directory"},
		{"file URL of the root", "file:///", "is the root directory"},
		{"root directory", "/", "is the root directory"},
		{"root directory spelled long", "/srv/..", "is the root directory"},
		{"tilde", "~/pub", "starts with ~, which is not expanded"},
		{"NUL byte", "pub\x00x", "NUL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) = %+v, %v; want an error containing %q", tc.in, got, err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error repeats the secret: %v", err)
			}
		})
	}
	if _, err := Parse("s3://k:s@bucket", ""); !errors.Is(err, ErrCredentials) {
		t.Fatalf("credentials: %v, want ErrCredentials", err)
	}
}

func TestLocationJoinPlacesATable(t *testing.T) {
	if got := (Location{S3: "s3://b/p"}).Join("trades", "trades-v2"); got != "s3://b/p/trades/trades-v2" {
		t.Fatalf("s3 join = %s", got)
	}
	if got := (Location{Dir: "/srv/pub"}).Join("trades", "trades"); got != filepath.Join("/srv/pub", "trades", "trades") {
		t.Fatalf("dir join = %s", got)
	}
}

func TestLocationSplitS3NamesTheBucketAndTheKeyPrefix(t *testing.T) {
	for _, tc := range []struct {
		in             Location
		bucket, prefix string
	}{
		{Location{S3: "s3://b"}, "b", ""},
		{Location{S3: "s3://b/p"}, "b", "p"},
		{Location{S3: "s3://b/p/q"}, "b", "p/q"},
		{Location{Dir: "/srv/pub"}, "", ""},
		{Location{}, "", ""},
	} {
		if b, p := tc.in.SplitS3(); b != tc.bucket || p != tc.prefix {
			t.Errorf("%+v.SplitS3() = %q, %q; want %q, %q", tc.in, b, p, tc.bucket, tc.prefix)
		}
	}
}

// TestLocationParentUndoesJoin: Parent gives back the location Join was
// called on, and refuses what Join cannot have made, or what would leave
// no location (no bucket, the root directory).
func TestLocationParentUndoesJoin(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Location
		elem []string
		want Location // zero: Parent reports false
	}{
		{"s3 one element", Location{S3: "s3://b/p/trades"}, []string{"trades"}, Location{S3: "s3://b/p"}},
		{"s3 two elements", Location{S3: "s3://b/p/trades/trades-v2"}, []string{"trades", "trades-v2"}, Location{S3: "s3://b/p"}},
		{"s3 down to the bucket", Location{S3: "s3://b/trades"}, []string{"trades"}, Location{S3: "s3://b"}},
		{"s3 the bucket itself", Location{S3: "s3://trades"}, []string{"trades"}, Location{}},
		{"s3 a longer name ending alike", Location{S3: "s3://b/mytrades"}, []string{"trades"}, Location{}},
		{"s3 another name", Location{S3: "s3://b/p/quotes"}, []string{"trades"}, Location{}},
		{"s3 an empty key element", Location{S3: "s3://b/p//trades"}, []string{"trades"}, Location{}},
		{"dir one element", Location{Dir: "/srv/pub/trades"}, []string{"trades"}, Location{Dir: "/srv/pub"}},
		{"dir two elements", Location{Dir: "/srv/pub/trades/trades"}, []string{"trades", "trades"}, Location{Dir: "/srv/pub"}},
		{"dir a longer name ending alike", Location{Dir: "/srv/mytrades"}, []string{"trades"}, Location{}},
		{"dir down to the root", Location{Dir: "/trades"}, []string{"trades"}, Location{}},
		{"no elements", Location{Dir: "/srv/pub"}, nil, Location{}},
		{"the zero location", Location{}, []string{"trades"}, Location{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.in.Parent(tc.elem...)
			if got != tc.want || ok == tc.want.IsZero() {
				t.Fatalf("%+v.Parent(%q) = %+v, %v; want %+v", tc.in, tc.elem, got, ok, tc.want)
			}
			if ok && got.Join(tc.elem...) != tc.in.String() {
				t.Fatalf("%+v.Join(%q) = %s; want %s back", got, tc.elem, got.Join(tc.elem...), tc.in)
			}
		})
	}
}

// FuzzParse: Parse never panics, and what it accepts is
// well formed (one of S3 and Dir, an s3 URL with a bucket and no
// credentials, an absolute directory that is not the root), reads back
// to itself from String, and is the Parent of a table Joined under it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "s3://b", "s3://b/p/", "s3://u:p@b/p", "file:///a", "file://localhost/a/", "file://h/a",
		"/a/b", "a/b", "../../published", "~/x", "gs://x", "s3://b?x", "file:///", "/", "s3://%zz", "file:///a#b", "a\x00b"} {
		f.Add(s, "/base/dir")
	}
	f.Fuzz(func(t *testing.T, s, base string) {
		loc, err := Parse(s, base)
		if err != nil {
			if !loc.IsZero() {
				t.Fatalf("Parse(%q) failed but returned %+v", s, loc)
			}
			return
		}
		if s == "" {
			if !loc.IsZero() {
				t.Fatalf("Parse(\"\") = %+v", loc)
			}
			return
		}
		switch {
		case loc.S3 != "" && loc.Dir != "":
			t.Fatalf("Parse(%q) = %+v: both set", s, loc)
		case loc.S3 != "":
			if !strings.HasPrefix(loc.S3, "s3://") || len(loc.S3) == len("s3://") || strings.HasSuffix(loc.S3, "/") {
				t.Fatalf("Parse(%q) = %+v: not an s3 URL with a bucket", s, loc)
			}
			host, _, _ := strings.Cut(strings.TrimPrefix(loc.S3, "s3://"), "/")
			if strings.Contains(host, "@") {
				t.Fatalf("Parse(%q) = %+v: credentials accepted", s, loc)
			}
		case loc.Dir != "":
			if !filepath.IsAbs(loc.Dir) || loc.Dir != filepath.Clean(loc.Dir) || loc.Dir == filepath.Dir(loc.Dir) {
				t.Fatalf("Parse(%q) = %+v: not a clean absolute directory below the root", s, loc)
			}
		default:
			t.Fatalf("Parse(%q) accepted a non-empty value as the zero location", s)
		}
		again, err := Parse(loc.String(), "/other")
		if err != nil || again != loc {
			t.Fatalf("Parse(%q) = %+v, whose String %q reads back as %+v, %v", s, loc, loc.String(), again, err)
		}
		// A table placed under it gives it back.
		table, err := Parse(loc.Join("trades", "trades-v2"), "")
		if err != nil {
			t.Fatalf("Parse(%q) = %+v, whose table location %q does not parse: %v", s, loc, loc.Join("trades", "trades-v2"), err)
		}
		if p, ok := table.Parent("trades", "trades-v2"); !ok || p != loc {
			t.Fatalf("Parse(%q) = %+v, but the parent of its table %+v is %+v, %v", s, loc, table, p, ok)
		}
	})
}
