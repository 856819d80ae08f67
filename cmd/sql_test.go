package cmd

import (
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/meta/history"
	"github.com/streamcast/streamcast/pkg/meta/sqlview"
)

func TestSQLFormatFollowsFlagThenExtensionThenTerminal(t *testing.T) {
	for _, tc := range []struct {
		format, output string
		terminal       bool
		want           sqlview.Format
	}{
		{"", "", true, sqlview.FormatTable},
		{"", "", false, sqlview.FormatNDJSON},
		{"", "out.parquet", false, sqlview.FormatParquet},
		{"", "out.CSV", false, sqlview.FormatCSV},
		{"", "out.json", false, sqlview.FormatJSON},
		{"", "out.ndjson", false, sqlview.FormatNDJSON},
		{"csv", "out.parquet", false, sqlview.FormatCSV},
		{"JSON", "", true, sqlview.FormatJSON},
	} {
		got, err := sqlFormat(tc.format, tc.output, tc.terminal)
		if err != nil || got != tc.want {
			t.Errorf("--format %q -o %q terminal %v: got %q, %v; want %q", tc.format, tc.output, tc.terminal, got, err, tc.want)
		}
	}
	if _, err := sqlFormat("parquet", "", true); err == nil {
		t.Errorf("parquet to a terminal: no refusal")
	}
}

func TestParseAsOfTS(t *testing.T) {
	want := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	for _, s := range []string{"2026-01-02T03:04:05.000006Z", "1767323045000006"} {
		got, err := parseTime(s)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: got %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := parseTime("yesterday"); err == nil {
		t.Errorf("yesterday: no refusal")
	}
}

func TestUnpublishedNoteNamesTheOffsetsAndTheFlagsThatIncludeThem(t *testing.T) {
	const url = "ws://127.0.0.1:8765/trades"
	for _, tc := range []struct {
		name   string
		start  int64
		u      history.Unpublished
		follow bool
		want   string
	}{
		{"rows past the published end", 1, history.Unpublished{From: 4, To: 6, Rows: 2}, false,
			"sql: answered from the published offsets 1..3; 2 newer rows (offsets 4..5) are not published yet; rerun with --as-of-offset 5 --broker " + url + " to include them, read from the running server"},
		{"one row", 1, history.Unpublished{From: 4, To: 5, Rows: 1}, false,
			"sql: answered from the published offsets 1..3; 1 newer row (offset 4) is not published yet; rerun with --as-of-offset 4 --broker " + url + " to include it, read from the running server"},
		{"nothing published yet", 1, history.Unpublished{From: 1, To: 11, Rows: 10}, false,
			"sql: answered from published rows, of which there are none yet; 10 newer rows (offsets 1..10) are not published yet; rerun with --as-of-offset 10 --broker " + url + " to include them, read from the running server"},
		{"following", 100, history.Unpublished{From: 500, To: 520, Rows: 20}, true,
			"sql: following the published offsets 100..499; 20 newer rows (offsets 500..519) are not published yet; rerun with --broker " + url + " to include them and every row after"},
	} {
		if got := unpublishedNote(tc.start, tc.u, url, tc.follow); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestSQLBrokerHintIsTheConfigsListenAddressWhenItNamesAPort(t *testing.T) {
	for _, tc := range []struct {
		listen, cert, stream, want string
	}{
		{"127.0.0.1:8765", "", "trades", "ws://127.0.0.1:8765/trades"},
		{":8765", "", "trades", "ws://127.0.0.1:8765/trades"},
		{"0.0.0.0:9000", "server.pem", "trades", "wss://127.0.0.1:9000/trades"},
		{"[::1]:9000", "", "trades", "ws://[::1]:9000/trades"},
		{"127.0.0.1:0", "", "trades", "ws://host:port/trades"},
		{"127.0.0.1:8765", "", "", "ws://127.0.0.1:8765/STREAM"},
	} {
		a := &app{}
		a.cfg.Listen, a.cfg.TLS.CertFile = tc.listen, tc.cert
		if got := sqlBrokerHint(a, tc.stream); got != tc.want {
			t.Errorf("listen %q, cert %q, stream %q: got %s, want %s", tc.listen, tc.cert, tc.stream, got, tc.want)
		}
	}
}
