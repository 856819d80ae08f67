package meta

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// PublishedDir is the name of the default published prefix under the root:
// <root>/published. No stream may take it (CheckName).
const PublishedDir = "published"

// The names of a stream's metadata, in its home and under the published
// prefix alike. The helpers below are the only place they are spelled.
const (
	metadataDirSuffix   = ".metadata"      // <stream>.metadata/: the versions and the hint
	plainMetadataSuffix = ".metadata.json" // <stream>.metadata.json: the plain copy
)

// metadataDirName is <stream>.metadata, the directory that holds the
// stream's numbered versions and its version hint.
func metadataDirName(stream string) string { return stream + metadataDirSuffix }

// plainMetadataName is <stream>.metadata.json, the plain copy of the
// stream's current version.
func plainMetadataName(stream string) string { return stream + plainMetadataSuffix }

// streamOfMetadataDir is the stream whose metadataDirName is name.
func streamOfMetadataDir(name string) (string, bool) {
	return strings.CutSuffix(name, metadataDirSuffix)
}

// streamOfPlainMetadata is the stream whose plainMetadataName is name.
func streamOfPlainMetadata(name string) (string, bool) {
	return strings.CutSuffix(name, plainMetadataSuffix)
}

// LogName returns the name of a stream's n-th log (n ≥ 1): the first is
// named after the stream, later ones <stream>-v2, <stream>-v3, … (a new
// log per schema, after a migrate). n < 1 is treated as 1.
func LogName(stream string, n int) string {
	if n <= 1 {
		return stream
	}
	return stream + "-v" + strconv.Itoa(n)
}

// Layout places the streams of one root and their published tables:
//
//	<root>/<stream>/                         the stream's home (StreamDir)
//	<root>/<stream>/<log>/                   each of its logs (LogDir)
//	<root>/<stream>/<stream>.metadata/       versioned stream metadata (MetadataDir)
//	<root>/<stream>/<stream>.metadata.json   plain copy of the current version (MetadataFile)
//	<prefix>/<stream>/<log>/                 a log's published Iceberg table (TableLocation)
//
// where the prefix is the configured published location, or by default
// <root>/published. The names given to its methods must have passed
// CheckName (log names come from LogName); a Layout does not check them.
type Layout struct {
	root      string             // as given: paths under it stay relative when it is
	published warehouse.Location // the prefix, the default resolved
	explicit  bool               // the prefix was configured
}

// NewLayout returns the layout of root, with published tables under
// published as warehouse.Parse reads it (a relative directory is
// resolved against the working directory, as root is), or under
// <root>/published when published is "".
func NewLayout(root, published string) (Layout, error) {
	l := Layout{root: root}
	p, err := warehouse.Parse(published, "")
	if err != nil {
		return Layout{}, err
	}
	if !p.IsZero() {
		l.published, l.explicit = p, true
		return l, nil
	}
	// The default published prefix, computed here and nowhere else.
	dir, err := filepath.Abs(filepath.Join(root, PublishedDir))
	if err != nil {
		return Layout{}, fmt.Errorf("find the default published prefix under root %q: %w", root, err)
	}
	l.published = warehouse.Location{Dir: dir}
	return l, nil
}

// Root returns the root, as given.
func (l Layout) Root() string { return l.root }

// StreamDir returns the stream's home directory, <root>/<stream>.
func (l Layout) StreamDir(stream string) string { return filepath.Join(l.root, stream) }

// LogDir returns the directory of one of the stream's logs,
// <root>/<stream>/<log>.
func (l Layout) LogDir(stream, log string) string { return filepath.Join(l.root, stream, log) }

// MetadataDir returns the stream's metadata directory,
// <root>/<stream>/<stream>.metadata.
func (l Layout) MetadataDir(stream string) string {
	return filepath.Join(l.root, stream, metadataDirName(stream))
}

// MetadataFile returns the plain copy of the stream's current metadata,
// <root>/<stream>/<stream>.metadata.json.
func (l Layout) MetadataFile(stream string) string {
	return filepath.Join(l.root, stream, plainMetadataName(stream))
}

// Published returns the published prefix, the default resolved to the
// absolute <root>/published.
func (l Layout) Published() warehouse.Location { return l.published }

// DefaultPublished reports whether the prefix is the default
// <root>/published (none was configured).
func (l Layout) DefaultPublished() bool { return !l.explicit }

// TableLocation returns where a log's published Iceberg table lives,
// <prefix>/<stream>/<log>: an s3:// URL or an absolute directory.
func (l Layout) TableLocation(stream, log string) string {
	return l.published.Join(stream, log)
}

// StoredPublished returns the published prefix a new log of the stream
// stores (logstore.Config.Published). A configured prefix is stored as
// ParseLocation spelled it, absolute. The default is stored relative to
// the log's directory (../../published), so a root moved or restored
// elsewhere as a whole keeps its tables beside its logs.
func (l Layout) StoredPublished(stream, log string) string {
	if l.explicit {
		return l.published.String()
	}
	logDir, err := filepath.Abs(l.LogDir(stream, log))
	if err != nil {
		return l.published.String()
	}
	rel, err := filepath.Rel(logDir, l.published.Dir)
	if err != nil {
		return l.published.String()
	}
	return filepath.ToSlash(rel)
}

// Check refuses a local published prefix that overlaps the homes of the
// given streams: the root itself, a directory inside a stream's home, or
// a place whose tables would land in the root (<prefix>/<stream> being a
// stream's home or the root). The streams' names must have passed
// CheckName. An s3:// prefix never overlaps.
func (l Layout) Check(streams []string) error {
	if l.published.Dir == "" {
		return nil
	}
	root, err := filepath.Abs(l.root)
	if err != nil {
		return fmt.Errorf("find root %q: %w", l.root, err)
	}
	pub := l.published.Dir
	fold := func(p string) string { return Fold(filepath.Clean(p)) }
	names := map[string]string{}
	for _, s := range streams {
		names[Fold(s)] = s
	}
	switch {
	case fold(pub) == fold(root):
		return fmt.Errorf("published is the root %s itself, so each log's table would be its own directory; publish to another directory, or leave published out for %s",
			root, filepath.Join(root, PublishedDir))
	case within(fold(root), fold(pub)):
		rel, _ := filepath.Rel(root, pub)
		first := Fold(strings.Split(filepath.ToSlash(rel), "/")[0])
		if s, ok := names[first]; ok {
			return fmt.Errorf("published %s is inside the home of stream %q (%s), where its logs live; publish to another directory, or leave published out for %s",
				pub, s, filepath.Join(root, s), filepath.Join(root, PublishedDir))
		}
	case within(fold(pub), fold(root)):
		rel, _ := filepath.Rel(pub, root)
		first := Fold(strings.Split(filepath.ToSlash(rel), "/")[0])
		if s, ok := names[first]; ok {
			return fmt.Errorf("root %s is inside %s, where stream %q's tables would go under published %s; move root out of the published prefix, or publish elsewhere",
				root, filepath.Join(pub, s), s, pub)
		}
	}
	return nil
}

// within reports whether path is strictly inside dir (both clean, absolute).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
