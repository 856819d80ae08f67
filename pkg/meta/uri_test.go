package meta

import (
	"strings"
	"testing"
)

func TestSplitMetadataURINamesTheDirectoryAndTheStream(t *testing.T) {
	for _, tc := range []struct{ uri, dir, stream, err string }{
		{"file:///srv/pub/trades/trades.metadata.json", "/srv/pub/trades", "trades", ""},
		{"file:///srv/pub/trades/trades.metadata/version-hint.text", "/srv/pub/trades", "trades", ""},
		{"file:///srv/pub/trades/trades.metadata/v3.metadata.json", "/srv/pub/trades", "trades", ""},
		{"/srv/pub/v2x/v2x.metadata.json", "/srv/pub/v2x", "v2x", ""},
		{"s3://bucket/tables/trades/trades.metadata.json", "s3://bucket/tables/trades", "trades", ""},
		{"s3://bucket/trades/trades.metadata/version-hint.text", "s3://bucket/trades", "trades", ""},
		{"s3://trades.metadata.json", "", "", "names no bucket"},
		{"http://host/trades.metadata.json", "", "", "neither file:// nor s3://"},
		{"file:///srv/pub/trades/other.json", "", "", "names neither a stream's plain metadata copy nor its version hint"},
		{"file://host/srv/trades.metadata.json", "", "", "not a file:// URL of a local path"},
		{"trades/trades.metadata.json", "", "", "neither file:// nor s3://"},
		{"s3://key:secret@bucket/trades/trades.metadata.json", "", "", "names credentials"},
		{"s3://bucket/trades.metadata/version-hint.text", "s3://bucket", "trades", ""},
		{"s3://trades.metadata/version-hint.text", "", "", "names no bucket"},
	} {
		dir, stream, err := splitMetadataURI(tc.uri)
		switch {
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("%s: the error repeats the secret: %v", tc.uri, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one saying %q", tc.uri, err, tc.err)
		case tc.err == "" && (err != nil || dir.String() != tc.dir || stream != tc.stream):
			t.Errorf("%s: %q %q %v, want %q %q", tc.uri, dir, stream, err, tc.dir, tc.stream)
		}
	}
}
