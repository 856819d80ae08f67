package meta

import (
	"context"
	"fmt"
	"net/url"
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
	if bucketPath, ok := strings.CutPrefix(dir, "s3://"); ok {
		bucket, prefix, _ := strings.Cut(bucketPath, "/")
		if prefix != "" {
			prefix += "/"
		}
		client, err := newS3Client(ctx, s3cfg)
		if err != nil {
			return nil, fmt.Errorf("reach %s for the metadata of stream %q: %w", uri, stream, err)
		}
		p = s3Place{client: client, bucket: bucket, prefix: prefix, lists: &st.lists}
	} else {
		p = dirPlace{dir: dir, lists: &st.lists}
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

// splitMetadataURI returns the directory a metadata URI sits in (an
// absolute local directory, or s3://bucket/prefix without the trailing
// '/') and the stream it names.
func splitMetadataURI(uri string) (dir, stream string, err error) {
	bad := func(why string) error {
		return fmt.Errorf("metadata URI %q %s; give the greeting's metadata (…/<stream>/<stream>.metadata.json) or metadata_hint (…/<stream>.metadata/version-hint.text), as file:// or s3://", uri, why)
	}
	var p string
	switch {
	case strings.HasPrefix(uri, "s3://"):
		p = uri
	case strings.HasPrefix(uri, "file://"):
		u, perr := url.Parse(uri)
		if perr != nil || (u.Host != "" && u.Host != "localhost") {
			return "", "", bad("is not a file:// URL of a local path")
		}
		p = filepath.ToSlash(u.Path)
	case filepath.IsAbs(uri):
		p = filepath.ToSlash(uri)
	default:
		return "", "", bad("is neither file:// nor s3://")
	}
	base := path.Base(p)
	parent := path.Dir(p)
	switch {
	case strings.HasSuffix(path.Base(parent), ".metadata"):
		// The hint or a version file inside <stream>.metadata/.
		stream = strings.TrimSuffix(path.Base(parent), ".metadata")
		parent = path.Dir(parent)
	case strings.HasSuffix(base, ".metadata.json"):
		stream = strings.TrimSuffix(base, ".metadata.json")
	default:
		return "", "", bad("names neither a stream's plain metadata copy nor its version hint")
	}
	if err := CheckName(stream); err != nil {
		return "", "", bad("names no stream: " + err.Error())
	}
	if strings.HasPrefix(p, "s3://") {
		if strings.Count(strings.TrimPrefix(parent, "s3:/"), "/") < 1 {
			return "", "", bad("names no bucket")
		}
		return strings.Replace(parent, "s3:/", "s3://", 1), stream, nil
	}
	return filepath.FromSlash(parent), stream, nil
}
