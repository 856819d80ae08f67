package meta

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxNameLen is the longest stream name, in bytes.
const MaxNameLen = 128

// nameRE is the stream-name grammar. A leading letter or digit keeps
// names such as "_wal" and "_control", and dot files, free for the layout.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// windowsDevices are names Windows reserves for devices in every directory
// (with or without an extension): a root copied there could not hold them.
var windowsDevices = map[string]bool{
	"con": true, "prn": true, "aux": true, "nul": true,
	"com0": true, "com1": true, "com2": true, "com3": true, "com4": true,
	"com5": true, "com6": true, "com7": true, "com8": true, "com9": true,
	"lpt0": true, "lpt1": true, "lpt2": true, "lpt3": true, "lpt4": true,
	"lpt5": true, "lpt6": true, "lpt7": true, "lpt8": true, "lpt9": true,
}

// CheckName checks a stream name: the grammar
// [A-Za-z0-9][A-Za-z0-9_.-]{0,127}, and no clash with the layout. The
// name is the stream's URL path and the name of its directory, of its
// first log and of its published namespace, so it refuses:
//
//   - "published" in any case: the default published prefix is
//     <root>/published, where the stream's home would sit;
//   - a name ending in '.', which Windows drops, so "a." and "a" would
//     share one directory;
//   - a Windows device name (con, nul, com1, …, also with an extension);
//   - the path of one of serve's HTTP routes, in any case: stats, health,
//     and metrics and control, kept for routes to come.
//
// Two names that differ only in case share a directory on a
// case-insensitive file system; Fold gives the key to compare them by.
// The empty name is refused too: only a live-only stream may have it (it
// has no directory), and its caller allows it before calling CheckName.
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("the empty name names no directory; only a live-only stream (durable: false) may have it")
	}
	if !nameRE.MatchString(name) {
		shown := name
		if len(shown) > MaxNameLen+8 {
			shown = shown[:MaxNameLen] + "…"
		}
		return fmt.Errorf("%q is not a stream name: use letters, digits, '_', '.' and '-', starting with a letter or digit, at most %d characters", shown, MaxNameLen)
	}
	folded := Fold(name)
	if folded == PublishedDir {
		return fmt.Errorf("%q would be the directory <root>/%s, where the default published prefix keeps every stream's tables (names are compared ignoring case, as some file systems do); choose another name", name, PublishedDir)
	}
	switch folded {
	case "stats", "health", "metrics", "control":
		// Streams share the URL space with serve's HTTP routes (/stats,
		// /health) and the ones kept for later: /stats cannot be both.
		return fmt.Errorf("%q is reserved for serve's HTTP routes (stats, health, metrics and control, compared ignoring case): /%s is a route's path, not a stream's; choose another name", name, name)
	}
	if strings.HasSuffix(name, ".") {
		return fmt.Errorf("%q ends with '.', which Windows drops from directory names, so it would share a directory with %q; choose a name without the trailing '.'", name, strings.TrimRight(name, "."))
	}
	base, _, _ := strings.Cut(folded, ".")
	if windowsDevices[base] {
		return fmt.Errorf("%q is a device name on Windows (%s), which no directory there can have; choose another name", name, strings.ToUpper(base))
	}
	return nil
}

// Fold returns the key two stream names are compared by to find a clash:
// names with the same key share a directory on a case-insensitive file
// system (the default on macOS and Windows), so a root never holds both.
// Stream names are ASCII, so lower case is enough.
func Fold(name string) string { return strings.ToLower(name) }
