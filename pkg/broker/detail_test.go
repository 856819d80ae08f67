package broker

import (
	"errors"
	"testing"
)

func TestPublicDetailCutsServerPathsToTheirLastElement(t *testing.T) {
	for _, c := range []struct{ err, want string }{
		{"append 20 rows to log /srv/data/t/t at offset 7: database or disk is full (13)",
			"append 20 rows to log t at offset 7: database or disk is full (13)"},
		{"open /srv/data/t/t/buffer.db: unable to open database file (14)",
			"open buffer.db: unable to open database file (14)"},
		{`stat "/srv/data/t/": permission denied`, `stat "t": permission denied`},
		{"read file:///srv/pub/t/t/data/1-2-x.parquet: EOF", "read 1-2-x.parquet: EOF"},
		{"dir=/ failed", "dir=… failed"},
		{"rows 1/2 of 3 and s3://bucket/prefix stay", "rows 1/2 of 3 and s3://bucket/prefix stay"},
	} {
		if got := publicDetail(errors.New(c.err)); got != c.want {
			t.Errorf("publicDetail(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}
