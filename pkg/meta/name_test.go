package meta

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestCheckNameAcceptsTheGrammar(t *testing.T) {
	for _, name := range []string{
		"a", "Z", "0", "trades", "Trades-2024", "eu.trades", "a_b", "a-v2", "x.metadata", "a..b",
		"publishedx", "published-2", "my.published", "con1", "console", "nul-trades", "lpt10",
		"stats2", "health.eu", "my-metrics", "controls",
		strings.Repeat("a", MaxNameLen),
	} {
		if err := CheckName(name); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", name, err)
		}
	}
}

func TestCheckNameRefusals(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", "", "only a live-only stream"},
		{"slash", "a/b", `"a/b" is not a stream name`},
		{"backslash", `a\b`, "is not a stream name"},
		{"dot", ".", "is not a stream name"},
		{"dot dot", "..", "is not a stream name"},
		{"leading dot", ".hidden", "starting with a letter or digit"},
		{"leading underscore (the layout's _wal, _control)", "_wal", "starting with a letter or digit"},
		{"leading dash", "-a", "is not a stream name"},
		{"space", "a b", "is not a stream name"},
		{"non-ASCII letter", "trädes", "is not a stream name"},
		{"NUL", "a\x00", "is not a stream name"},
		{"too long", strings.Repeat("a", MaxNameLen+1), "at most 128 characters"},
		{"published", "published", "<root>/published, where the default published prefix"},
		{"published in another case", "Published", "ignoring case"},
		{"published upper case", "PUBLISHED", "ignoring case"},
		{"trailing dot", "a.", `share a directory with "a"`},
		{"trailing dots", "trades..", `share a directory with "trades"`},
		{"device name", "con", "device name on Windows (CON)"},
		{"device name in another case", "Nul", "device name on Windows (NUL)"},
		{"device name with an extension", "aux.log", "device name on Windows (AUX)"},
		{"numbered device", "COM3", "device name on Windows (COM3)"},
		{"the stats route", "stats", "reserved for serve's HTTP routes"},
		{"the health route", "health", "HTTP routes"},
		{"the metrics route", "metrics", "HTTP routes"},
		{"the control route", "control", "HTTP routes"},
		{"a route in another case", "Stats", "ignoring case"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckName(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckName(%q) = %v, want an error containing %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestFoldMakesCaseOnlyDifferencesClash(t *testing.T) {
	if Fold("Trades") != Fold("trades") || Fold("TRADES.eu") != Fold("trades.EU") {
		t.Fatal("names differing only in case fold apart")
	}
	if Fold("trades") == Fold("trade5") {
		t.Fatal("different names fold together")
	}
}

// grammar is the grammar, written out independently of nameRE.
var grammar = regexp.MustCompile(`\A[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\z`)

// FuzzCheckName: CheckName never panics, and a name it accepts matches the
// grammar, is one path element, is not the default published directory in
// any case, and places every directory of its stream inside the root.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"a", "trades", "published", "PUBLISHED", "a/b", "..", ".", "_wal", "a.", "con.txt",
		"x.metadata", "a-v2", strings.Repeat("z", 129), "\x00", "é"} {
		f.Add(s)
	}
	const root = "/srv/root"
	lay, err := NewLayout(root, "")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if err := CheckName(name); err != nil {
			if err.Error() == "" {
				t.Fatalf("CheckName(%q): an empty error", name)
			}
			return
		}
		if !grammar.MatchString(name) {
			t.Fatalf("CheckName accepted %q, outside the grammar", name)
		}
		if filepath.Base(name) != name || strings.EqualFold(name, PublishedDir) || strings.HasSuffix(name, ".") {
			t.Fatalf("CheckName accepted %q, which clashes with the layout", name)
		}
		// A stream's logs and metadata stay inside its own home, so no
		// two accepted names can reach each other's files.
		for _, p := range []string{lay.LogDir(name, LogName(name, 1)), lay.LogDir(name, LogName(name, 2)), lay.MetadataDir(name), lay.MetadataFile(name)} {
			if !within(lay.StreamDir(name), p) {
				t.Fatalf("stream %q puts %s outside its home %s", name, p, lay.StreamDir(name))
			}
		}
		for _, p := range []string{lay.StreamDir(name), lay.LogDir(name, LogName(name, 2)), lay.MetadataDir(name), lay.MetadataFile(name)} {
			if !within(root, p) || filepath.Dir(strings.TrimPrefix(p, root+"/")) == ".." {
				t.Fatalf("stream %q puts %s outside %s", name, p, root)
			}
			if within(lay.Published().Dir, p) || p == lay.Published().Dir {
				t.Fatalf("stream %q puts %s inside the default published prefix", name, p)
			}
		}
		if within(lay.StreamDir(name), lay.TableLocation(name, name)) {
			t.Fatalf("stream %q's table is inside its home", name)
		}
	})
}
