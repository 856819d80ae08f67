package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	icebergio "github.com/apache/iceberg-go/io"
	icebergs3 "github.com/apache/iceberg-go/io/gocloud/s3"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// Keep is how many versions of a stream's metadata each place keeps: the
// current one and the nine before it.
const Keep = 10

// HintFile is the name of the file holding the current version number,
// inside <stream>.metadata/.
const HintFile = "version-hint.text"

// ErrConflict is wrapped by Commit's error when another writer committed
// the version it meant to write (a lost compare-and-swap): re-read with
// Load, derive the change again, and retry.
var ErrConflict = errors.New("another writer committed this version of the stream metadata first")

// ErrNoMetadata is wrapped by Load's error when the home holds no
// metadata of the stream.
var ErrNoMetadata = errors.New("no stream metadata")

// Store reads and writes the versioned metadata of one stream in its two
// places: the home <root>/<stream>/ and <prefix>/<stream>/ beside the
// published tables. In each:
//
//	<stream>.metadata/vN.metadata.json   version N, immutable once written
//	<stream>.metadata/version-hint.text  N, the current version
//	<stream>.metadata.json               a plain copy of version N
//
// A commit writes the published place first (readers elsewhere depend on
// it), then the home. The published version is the commit point: a
// version whose published copy exists is committed, and a home left
// behind by a crash catches up from it (Resolve). Its methods are safe for
// concurrent use; writers in several processes are kept apart by the
// exclusive create of each version (compare-and-swap).
type Store struct {
	lay    Layout
	stream string
	home   place
	pub    place

	lists  atomic.Int64 // one-level listings of the published place (tests)
	syncs  atomic.Int64 // directory fsyncs in either local place (tests)
	parses atomic.Int64 // metadata documents parsed by reads (tests)

	// failAt, when set, is called at each named step of a write; an error
	// stops the write there, as a crash would (tests). The points:
	// "published" (a commit's published copy is written, the home's is
	// not), "adopt" (an adoption is about to write the home).
	failAt func(point string) error
}

// fail runs the test hook for point.
func (s *Store) fail(point string) error {
	if s.failAt == nil {
		return nil
	}
	return s.failAt(point)
}

// NewStore returns the store of stream in lay, reaching an s3:// prefix
// with the endpoint and region of s3 and credentials from the standard
// AWS environment only (never from a location or a config file of ours).
func NewStore(ctx context.Context, lay Layout, stream string, s3cfg warehouse.S3) (*Store, error) {
	st := &Store{lay: lay, stream: stream}
	st.home = dirPlace{dir: lay.StreamDir(stream), syncs: &st.syncs}
	p := lay.Published()
	if p.S3 == "" {
		st.pub = dirPlace{dir: p.Join(stream), lists: &st.lists, syncs: &st.syncs}
		return st, nil
	}
	sp, err := newS3Place(ctx, warehouse.Location{S3: p.Join(stream)}, s3cfg, &st.lists)
	if err != nil {
		return nil, fmt.Errorf("reach %s for the metadata of stream %q: %w", p.S3, stream, err)
	}
	st.pub = sp
	return st, nil
}

// newS3Client builds an S3 client the way the published tables' IO does
// (iceberg-go's AWS config: region, connect timeout, the standard
// credential chain), with the endpoint and addressing of cfg.
func newS3Client(ctx context.Context, cfg warehouse.S3) (*s3.Client, error) {
	props := map[string]string{icebergio.S3ConnectTimeout: "10"}
	if cfg.Region != "" {
		props[icebergio.S3Region] = cfg.Region
	}
	awsCfg, err := icebergs3.ParseAWSConfig(ctx, props)
	if err != nil {
		return nil, err
	}
	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv("AWS_S3_ENDPOINT")
	}
	return s3.NewFromConfig(*awsCfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = cfg.PathStyle || endpoint != ""
	}), nil
}

// Stream returns the stream's name.
func (s *Store) Stream() string { return s.stream }

func (s *Store) versionName(n int) string {
	return metadataDirName(s.stream) + "/v" + strconv.Itoa(n) + ".metadata.json"
}
func (s *Store) hintName() string  { return metadataDirName(s.stream) + "/" + HintFile }
func (s *Store) plainName() string { return plainMetadataName(s.stream) }

// PublishedURI returns the URI of the published plain copy,
// <prefix>/<stream>/<stream>.metadata.json (file://… or s3://…), the
// greeting's metadata.
func (s *Store) PublishedURI() string { return s.pub.uri(s.plainName()) }

// PublishedHintURI returns the URI of the published version hint, the
// greeting's metadata_hint.
func (s *Store) PublishedHintURI() string { return s.pub.uri(s.hintName()) }

// HomeURI returns the URI of the home's plain copy.
func (s *Store) HomeURI() string { return s.home.uri(s.plainName()) }

// Load reads the current version in the home; an error wrapping
// ErrNoMetadata when the home has none.
func (s *Store) Load(ctx context.Context) (*Metadata, error) {
	return s.read(ctx, s.home)
}

// LoadPublished reads the current version at the published prefix; an
// error wrapping ErrNoMetadata when there is none (a missing bucket or
// directory included).
func (s *Store) LoadPublished(ctx context.Context) (*Metadata, error) {
	return s.read(ctx, s.pub)
}

// read finds the current version of p: the hint's, or a later one a
// writer made before moving the hint (each probed in turn), and reads it.
func (s *Store) read(ctx context.Context, p place) (*Metadata, error) {
	m, _, err := s.readLike(ctx, p, nil, nil)
	return m, err
}

// readLike is read, which also returns the version file's bytes; when they
// are known's bytes (knownData) it returns known rather than parsing them
// again. Resolve reads the home and then the published copy, which are the
// same file in the steady state: a migration resolves its stream several
// times, and parsing a metadata document that grows with every log was the
// largest single item of a migration's CPU and garbage in its profiles,
// which the other streams' acks on the same cores paid for. The
// shortcut still reads both copies (docs/design.md §4.7: the published
// one is still checked for its version and stream id); it only skips
// decoding bytes already decoded.
func (s *Store) readLike(ctx context.Context, p place, known *Metadata, knownData []byte) (*Metadata, []byte, error) {
	n := 0
	b, err := p.get(ctx, s.hintName())
	switch {
	case err == nil:
		n, err = strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || n < 1 {
			return nil, nil, fmt.Errorf("%s holds %q, not a version number; put the highest N of the vN.metadata.json beside it there",
				p.uri(s.hintName()), clip(string(b), 40))
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("read the metadata of stream %q: %w", s.stream, err)
	}
	var data []byte
	for {
		next, err := p.get(ctx, s.versionName(n+1))
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read the metadata of stream %q: %w", s.stream, err)
		}
		n, data = n+1, next
	}
	if n == 0 {
		return nil, nil, fmt.Errorf("%s: %w", p.uri(metadataDirName(s.stream)+"/"), ErrNoMetadata)
	}
	if data == nil {
		data, err = p.get(ctx, s.versionName(n))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("%s names version %d, but %s is missing; put the highest N of the vN.metadata.json beside it in the hint",
				p.uri(s.hintName()), n, p.uri(s.versionName(n)))
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read the metadata of stream %q: %w", s.stream, err)
		}
	}
	if known != nil && known.Version == n && bytes.Equal(data, knownData) {
		return known, data, nil
	}
	s.parses.Add(1)
	m, err := Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p.uri(s.versionName(n)), err)
	}
	if m.Version != n {
		return nil, nil, fmt.Errorf("%s says it is version %d; a version file is never renamed or edited: restore the file written as version %d",
			p.uri(s.versionName(n)), m.Version, n)
	}
	return m, data, nil
}

// Commit writes m as the next version, m.Version+1 (m is the version it
// was derived from, or New's for the first), published copy first, then
// the home's; it returns what it wrote. When another writer committed
// that version first, it returns an error wrapping ErrConflict and the
// caller re-reads (Load) and retries. A commit that failed partway, the
// published copy written and the home's not, is finished by retrying it
// with the same m. After a successful commit each place keeps the last
// Keep versions.
func (s *Store) Commit(ctx context.Context, m *Metadata) (*Metadata, error) {
	if m.StreamID == "" {
		return nil, fmt.Errorf("commit the metadata of stream %q: it has no stream_id", s.stream)
	}
	next := m.Clone()
	next.Format, next.Stream, next.Version = Format, s.stream, m.Version+1
	if err := next.check(); err != nil {
		return nil, fmt.Errorf("commit the metadata of stream %q: %w", s.stream, err)
	}
	data, err := next.marshal()
	if err != nil {
		return nil, fmt.Errorf("commit the metadata of stream %q: %w", s.stream, err)
	}
	if err := s.install(ctx, s.pub, next.Version, data); err != nil {
		return nil, err
	}
	if err := s.fail("published"); err != nil {
		return nil, err
	}
	if err := s.install(ctx, s.home, next.Version, data); err != nil {
		return nil, err
	}
	s.prune(ctx, next.Version)
	return next, nil
}

// Adopt copies m, the published copy's current version, into a home that
// has no metadata: a compare-and-swap against "no version". It refuses a
// home that has metadata (ErrConflict): never overwrite one.
func (s *Store) Adopt(ctx context.Context, m *Metadata) error {
	switch _, err := s.Load(ctx); {
	case err == nil:
		return fmt.Errorf("adopt the published metadata of stream %q into %s: the home has metadata of its own: %w", s.stream, s.HomeURI(), ErrConflict)
	case !errors.Is(err, ErrNoMetadata):
		return err
	}
	if err := s.fail("adopt"); err != nil {
		return err
	}
	return s.copyTo(ctx, s.home, m)
}

// copyTo installs m, read from one place, as the same version in p.
func (s *Store) copyTo(ctx context.Context, p place, m *Metadata) error {
	data, err := m.marshal()
	if err != nil {
		return err
	}
	return s.install(ctx, p, m.Version, data)
}

// install writes version n (data) into p and moves its hint and plain
// copy: the version is created exclusively, and one already there with
// the same bytes (a retried commit's own) is taken as written; other
// bytes are a lost race (ErrConflict).
func (s *Store) install(ctx context.Context, p place, n int, data []byte) error {
	err := p.create(ctx, s.versionName(n), data)
	if errors.Is(err, errExists) {
		have, gerr := p.get(ctx, s.versionName(n))
		if gerr != nil {
			return fmt.Errorf("commit version %d of the metadata of stream %q: %s exists but cannot be read: %w", n, s.stream, p.uri(s.versionName(n)), gerr)
		}
		if !bytes.Equal(have, data) {
			return fmt.Errorf("commit version %d of the metadata of stream %q at %s: %w", n, s.stream, p.uri(s.versionName(n)), ErrConflict)
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("commit version %d of the metadata of stream %q: %w", n, s.stream, err)
	}
	if err := p.putHint(ctx, s.hintName(), []byte(strconv.Itoa(n)+"\n")); err != nil {
		return fmt.Errorf("commit version %d of the metadata of stream %q: %w", n, s.stream, err)
	}
	if err := p.put(ctx, s.plainName(), data); err != nil {
		return fmt.Errorf("commit version %d of the metadata of stream %q: %w", n, s.stream, err)
	}
	return nil
}

// prune deletes the version that fell out of the last Keep: versions are
// made one at a time, so one per commit keeps each place at Keep. A
// failure leaves an extra old version, harmless, for the next commit.
func (s *Store) prune(ctx context.Context, n int) {
	old := n - Keep
	if old < 1 {
		return
	}
	for _, p := range []place{s.pub, s.home} {
		_ = p.remove(ctx, s.versionName(old))
	}
}

// clip shortens s for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
