package meta

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestGuardRefusesBeforeReadingTheLog: the checks that need only the
// metadata refuse another identity, a migrated stream, a migration under
// way and retention, each as a *GuardError naming its check, before the log
// is read (lg is nil here); RefuseNew always refuses.
func TestGuardRefusesBeforeReadingTheLog(t *testing.T) {
	const id = "7b0b6a3e-3f1c-4c43-9a43-2f4f4f3b9c11"
	g := &Guard{Stream: "trades", StreamID: id, KnownOffset: 1, KnownRow: `{"a":1}`}
	age := "30d"
	for _, tc := range []struct {
		name  string
		md    Metadata
		check string
		want  string
	}{
		{"identity", Metadata{StreamID: "other", Logs: []Log{{Name: "trades", StartOffset: 1}}}, CheckIdentity, "stream_id other"},
		{"case of the id", Metadata{StreamID: strings.ToUpper(id), Logs: []Log{{Name: "trades"}, {Name: "trades.2", StartOffset: 9}}}, CheckNoMigration, "2 logs"},
		{"migrate intent", Metadata{StreamID: id, Version: 4, Logs: []Log{{Name: "trades", StartOffset: 1}}, Intent: &Intent{Kind: "migrate"}}, CheckNoMigration, "version 4"},
		{"retention", Metadata{StreamID: id, Logs: []Log{{Name: "trades", StartOffset: 1}}, Retention: Retention{MaxAge: &age}}, CheckNoRetention, "max_age 30d"},
	} {
		err := g.Check(context.Background(), &tc.md, nil, 1, 1)
		var ge *GuardError
		if !errors.As(err, &ge) || ge.Check != tc.check || ge.Stream != "trades" {
			t.Fatalf("%s: %v; want the check %q to fail", tc.name, err, tc.check)
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "history_guard") {
			t.Errorf("%s: the refusal does not say %q: %v", tc.name, tc.want, err)
		}
	}
	err := g.RefuseNew("/srv/root", "file:///srv/published")
	var ge *GuardError
	if !errors.As(err, &ge) || ge.Check != CheckIdentity || !strings.Contains(err.Error(), "/srv/root") {
		t.Fatalf("RefuseNew: %v; want an identity refusal naming the home", err)
	}
}
