package config

import (
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/schema"
)

// TestHistoryGuardAddedToARunningStreamWaitsForARestart: a reload that
// adds a guard to a stream already serving says that it applies at the
// next start (the guard checks before traffic is admitted).
func TestHistoryGuardAddedToARunningStreamWaitsForARestart(t *testing.T) {
	old := DefaultStream("trades")
	next := old
	next.HistoryGuard = &HistoryGuard{StreamID: "5b0f4c1e-8f6a-4d2b-9a57-2f0c2d1e6b90", KnownOffset: 1, KnownRow: "{}"}
	if why := old.Change(schema.Any(), next, schema.Any()); !strings.Contains(why, "history_guard") || !strings.Contains(why, "when serve restarts") {
		t.Fatalf("a guard added by reload: %q; want it named as applying at the next start", why)
	}
	if why := old.Change(schema.Any(), old, schema.Any()); why != "" {
		t.Fatalf("an unchanged declaration: %q; want no change", why)
	}
}

// TestRestartOnlyNamesTheSectionsThatChanged: every section but streams
// applies at the next start; a nil and an empty allowed_origins are alike.
func TestRestartOnlyNamesTheSectionsThatChanged(t *testing.T) {
	var c Config
	next := c
	next.Listen = "127.0.0.1:1"
	next.AllowedOrigins = []string{}
	next.Streams = []Stream{DefaultStream("other")}
	if got := strings.Join(c.RestartOnly(next), ","); got != "listen" {
		t.Fatalf("RestartOnly = %q; want listen only", got)
	}
}

// TestRestartOnlyNamesAControlOrStatsChange: a change to control: (a
// profile, a bound) or to stats: is named, so a reload never drops it
// without a word; the same section read twice is no change.
func TestRestartOnlyNamesAControlOrStatsChange(t *testing.T) {
	c := Default()
	c.Control = &Control{MaxPending: 32, Profiles: map[string]Profile{"local": {Root: "a"}}}
	next := Default()
	next.Control = &Control{MaxPending: 32, Profiles: map[string]Profile{"local": {Root: "a"}}}
	if got := c.RestartOnly(next); len(got) != 0 {
		t.Fatalf("the same control: section: RestartOnly = %q; want nothing", got)
	}
	next.Control.Profiles["more"] = Profile{Root: "b"}
	next.Stats = StatsOff
	if got := strings.Join(c.RestartOnly(next), ","); got != "stats,control" {
		t.Fatalf("RestartOnly = %q; want stats,control", got)
	}
}
