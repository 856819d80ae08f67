package warehouse

import (
	"testing"
)

func TestNormSpellsALocalFileOneWay(t *testing.T) {
	pt, err := NewTable(Location{Dir: "/srv/pub lished"}, "s", "log", S3{})
	if err != nil {
		t.Fatal(err)
	}
	const want = "/srv/pub lished/s/log/data/1-2-x.parquet"
	for _, p := range []string{
		want, // a table written before its locations were URLs
		"/srv/pub lished/s/log/data/./1-2-x.parquet",
		"file:///srv/pub%20lished/s/log/data/1-2-x.parquet", // as DataPath and iceberg-go spell it
		"file:/srv/pub%20lished/s/log/data/1-2-x.parquet",   // as Hadoop writes it
		"file://localhost/srv/pub%20lished/s/log/data/1-2-x.parquet",
	} {
		if got := pt.Norm(p); got != want {
			t.Errorf("Norm(%q) = %q, want %q", p, got, want)
		}
	}
	if got := pt.DataPath("1-2-x.parquet"); got != "file:///srv/pub%20lished/s/log/data/1-2-x.parquet" {
		t.Errorf("DataPath = %q", got)
	}
	if got := pt.URI(); got != "file:///srv/pub%20lished/s/log" {
		t.Errorf("URI = %q", got)
	}
	// A bare path is a path, "%20" and all: that is where a table written
	// before spelled its files.
	if got := pt.Norm("/srv/pub%20lished/x"); got != "/srv/pub%20lished/x" {
		t.Errorf("Norm of a bare path with %%20 = %q", got)
	}
	if a, b := pt.Norm("file:///srv/a/x"), pt.Norm("/srv/b/x"); a == b {
		t.Errorf("two files normalise to one spelling %q", a)
	}
}
