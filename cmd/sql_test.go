package cmd

import (
	"testing"
	"time"

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
