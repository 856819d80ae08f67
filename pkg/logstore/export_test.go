package logstore

import (
	"context"
	"slices"
	"testing"
)

// runRole runs the maintenance role named role over dirs until ctx ends,
// as `streamcast maintain` runs it.
func runRole(ctx context.Context, role string, dirs []string, o MaintainOptions) error {
	return Maintain(ctx, Role(role), dirs, o)
}

// logRoleNames are the roles that work on a log alone, in serve's order:
// every role but retain, whose pass is the stream's (pkg/meta).
func logRoleNames() []string {
	return slices.DeleteFunc(RoleNames(), func(r string) bool { return r == string(RoleRetain) })
}

// setOverride applies policy overrides to an open handle, as WithOverride
// does at open, for tests that change them between steps.
func (l *Log) setOverride(o Config) {
	l.polMu.Lock()
	l.pol = l.cfg.Override(o)
	l.polMu.Unlock()
}

// fileRange is a local or published file's record, as the tests read it.
type fileRange struct {
	start, end int64
	name, path string
	rows       int64
	fileBytes  int64
}

// recordedFiles reads the records of table (files or published) in offset
// order.
func recordedFiles(t testing.TB, l *Log, table string) []fileRange {
	t.Helper()
	col := "''"
	if table == "published" {
		col = "path"
	}
	rows, err := l.rdb.QueryContext(context.Background(), `SELECT start_offset, end_offset, name, `+col+`, row_count, file_bytes FROM `+table+` ORDER BY start_offset`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []fileRange
	for rows.Next() {
		var f fileRange
		if err := rows.Scan(&f.start, &f.end, &f.name, &f.path, &f.rows, &f.fileBytes); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
