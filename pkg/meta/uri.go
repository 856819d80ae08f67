package meta

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// LoadURI reads the current version of a stream's metadata from a URI as
// a greeting gives it: the plain copy <dir>/<stream>.metadata.json
// ("metadata") or the hint <dir>/<stream>.metadata/version-hint.text
// ("metadata_hint"), file:// or s3://. It reads the hint and the version
// it names (or a later one a writer made before moving the hint), never the
// plain copy itself, so a reader always gets a whole, numbered version. An
// s3:// URI is reached with the endpoint and region of s3cfg and the
// standard AWS credential chain.
func LoadURI(ctx context.Context, uri string, s3cfg warehouse.S3) (*Metadata, error) {
	dir, stream, err := splitMetadataURI(uri)
	if err != nil {
		return nil, err
	}
	st := &Store{stream: stream}
	var p place
	if dir.S3 != "" {
		sp, err := newS3Place(ctx, dir, s3cfg, &st.lists)
		if err != nil {
			return nil, fmt.Errorf("reach %s for the metadata of stream %q: %w", uri, stream, err)
		}
		p = sp
	} else {
		p = dirPlace{dir: dir.Dir, lists: &st.lists}
	}
	m, err := st.read(ctx, p)
	if err != nil {
		return nil, err
	}
	if m.Stream != stream {
		return nil, fmt.Errorf("%s names stream %q, not %q as its file name says; give the metadata URI of the stream you mean", uri, m.Stream, stream)
	}
	return m, nil
}

// splitMetadataURI returns the location a metadata URI sits in (a local
// directory, or an s3:// bucket and prefix) and the stream it names. It
// reads the URI with warehouse.Parse, but refuses a relative path: a
// greeting gives an absolute one.
func splitMetadataURI(uri string) (dir warehouse.Location, stream string, err error) {
	bad := func(why string) error {
		return fmt.Errorf("metadata URI %q %s; give the greeting's metadata (…/<stream>/<stream>.metadata.json) or metadata_hint (…/<stream>.metadata/version-hint.text), as file:// or s3://", uri, why)
	}
	none := warehouse.Location{}
	s3 := strings.HasPrefix(uri, "s3://")
	if !s3 && !strings.HasPrefix(uri, "file://") && !filepath.IsAbs(uri) {
		return none, "", bad("is neither file:// nor s3://")
	}
	loc, err := warehouse.Parse(uri, "")
	switch {
	case err != nil && s3:
		return none, "", fmt.Errorf("metadata URI: %w", err) // Parse's error echoes no secret
	case err != nil && strings.HasPrefix(uri, "file://"):
		return none, "", bad("is not a file:// URL of a local path")
	case err != nil:
		return none, "", bad("is not a local path")
	}
	// The plain copy <dir>/<stream>.metadata.json, or the hint (or a
	// version file) inside <dir>/<stream>.metadata/.
	base := baseName(loc)
	elem := []string{base}
	in, ok := loc.Parent(base)
	if ok {
		stream, ok = streamOfMetadataDir(baseName(in))
	}
	if ok {
		elem = []string{baseName(in), base}
	} else if stream, ok = streamOfPlainMetadata(base); !ok {
		return none, "", bad("names neither a stream's plain metadata copy nor its version hint")
	}
	if err := CheckName(stream); err != nil {
		return none, "", bad("names no stream: " + err.Error())
	}
	dir, ok = loc.Parent(elem...)
	switch {
	case !ok && s3:
		return none, "", bad("names no bucket")
	case !ok:
		return none, "", bad("is in the root directory")
	}
	return dir, stream, nil
}

// baseName is the last element of loc: of its key below the bucket (the
// bucket itself when there is no key), or of its directory.
func baseName(loc warehouse.Location) string {
	if bucket, prefix := loc.SplitS3(); bucket != "" {
		return path.Base(bucket + "/" + prefix)
	}
	return filepath.Base(loc.Dir)
}
