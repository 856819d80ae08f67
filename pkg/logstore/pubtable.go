package logstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/hadoop"
	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the s3:// scheme for table IO
	"github.com/apache/iceberg-go/table"
)

// Properties streamcast keeps on the published table and its snapshots.
const (
	// propLogID names the log that owns the table (meta log_id): a log
	// never publishes into a table another log created (I8).
	propLogID = "streamcast.log-id"
	// propPublishedThrough is the last offset the table holds; every
	// offset from the first up to it is there exactly once.
	propPublishedThrough = "streamcast.published-through"
	// propPass is the token of the publish pass that made the latest
	// publishing commit; publish reconciles its intents against it.
	propPass = "streamcast.pass"
	// summaryOffsets is the snapshot summary entry naming the offset range
	// a publishing commit added or replaced, [start,end).
	summaryOffsets = "streamcast.offsets"
)

// tableProperties are set when the table is created and re-applied by every
// publishing commit: they bound the growth of metadata (old metadata files
// are deleted after each commit, ten are kept, manifests are merged).
var tableProperties = iceberg.Properties{
	table.MetadataDeleteAfterCommitEnabledKey: "true",
	table.MetadataPreviousVersionsMaxKey:      "10",
	"commit.manifest-merge.enabled":           "true",
	"commit.manifest.min-count-to-merge":      "2",
}

// pubTable is a log's published Iceberg table: where it lives and the IO
// that reaches it. The table itself is loaded fresh by each step that
// needs it; data files are read straight from the locations buffer.db
// records, without loading table metadata.
type pubTable struct {
	warehouse string           // the catalog warehouse: the prefix (s3://… or an absolute directory)
	location  string           // the table: <warehouse>/<stream>/<log>
	local     bool             // location is a local directory
	ident     table.Identifier // {stream, log}
	props     iceberg.Properties
	fsys      icebergio.IO

	catOnce sync.Once
	cat     *hadoop.Catalog
	catErr  error

	// manifests caches the data files each manifest lists; manifests are
	// immutable, so an entry never goes stale.
	manMu     sync.Mutex
	manifests map[string][]string
}

// published returns the log's published table handle, made on first use.
func (l *Log) published() (*pubTable, error) {
	l.pubMu.Lock()
	defer l.pubMu.Unlock()
	if l.pub != nil {
		return l.pub, nil
	}
	cfg := l.policy()
	pt, err := newPubTable(l.dir, cfg)
	if err != nil {
		return nil, fmt.Errorf("published table of log %s: %w", l.dir, err)
	}
	l.pub = pt
	return pt, nil
}

// PublishedLocation returns where the log's Iceberg table lives:
// <prefix>/<stream>/<log>, as an s3:// URL or an absolute directory.
func (l *Log) PublishedLocation() (string, error) {
	pt, err := l.published()
	if err != nil {
		return "", err
	}
	return pt.location, nil
}

// newPubTable places the table of the log in dir: under the prefix the log
// stores (PublishedPrefix), named by the stream and log names it stores,
// never by where the directory sits now, so a log moved elsewhere keeps
// publishing to its own table.
func newPubTable(dir string, cfg Config) (*pubTable, error) {
	stream, log := cfg.Stream, cfg.Log
	if stream == "" || log == "" {
		return nil, fmt.Errorf("the log stores no stream or log name to name its table by")
	}
	p, err := cfg.PublishedPrefix(dir)
	if err != nil {
		return nil, err
	}
	pt := &pubTable{ident: table.Identifier{stream, log}, props: iceberg.Properties{}, manifests: map[string][]string{}}
	pt.location = p.Join(stream, log)
	switch {
	case p.S3 != "":
		pt.warehouse = p.S3
		// The hadoop catalog's commit is not atomic on an object store;
		// it is safe here because commits to one table never overlap:
		// they run under the log's commit.lock (see commitLock).
		pt.props["allow-unsafe-commits"] = "true"
		pt.props[icebergio.S3ConnectTimeout] = "10"
		if cfg.S3.Region != "" {
			pt.props[icebergio.S3Region] = cfg.S3.Region
		}
		if cfg.S3.Endpoint != "" {
			pt.props[icebergio.S3EndpointURL] = cfg.S3.Endpoint
		}
		if cfg.S3.PathStyle || cfg.S3.Endpoint != "" {
			pt.props[icebergio.S3ForceVirtualAddressing] = "false"
		}
	default:
		pt.warehouse = p.Dir
		pt.local = true
	}
	// The IO outlives any one call: blob IO keeps the context it was made
	// with for every request.
	pt.fsys, err = icebergio.LoadFS(context.Background(), pt.props, pt.location)
	if err != nil {
		return nil, fmt.Errorf("reach %s: %w", pt.location, err)
	}
	return pt, nil
}

// catalog returns the hadoop catalog over the prefix.
func (pt *pubTable) catalog() (*hadoop.Catalog, error) {
	pt.catOnce.Do(func() {
		pt.cat, pt.catErr = hadoop.NewCatalog("streamcast", pt.warehouse, pt.props)
		if pt.catErr != nil {
			pt.catErr = fmt.Errorf("open the catalog at %s: %w", pt.warehouse, pt.catErr)
		}
	})
	return pt.cat, pt.catErr
}

func (pt *pubTable) close() {
	if pt == nil {
		return
	}
	if pt.cat != nil {
		_ = pt.cat.Close()
	}
	if c, ok := pt.fsys.(io.Closer); ok {
		_ = c.Close()
	}
}

// errNoTable reports that the published table does not exist (yet).
var errNoTable = errors.New("the published table does not exist")

// load loads the table's current metadata; errNoTable when there is none.
func (pt *pubTable) load(ctx context.Context) (*table.Table, error) {
	cat, err := pt.catalog()
	if err != nil {
		return nil, err
	}
	tbl, err := cat.LoadTable(ctx, pt.ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, fmt.Errorf("%s: %w", pt.location, errNoTable)
	}
	if err != nil {
		return nil, fmt.Errorf("load the published table %s: %w", pt.location, err)
	}
	return tbl, nil
}

// ensure loads the table, creating it (and its namespace) when missing,
// and checks that it is this log's: a table at the location that another
// log created is never published into (I8). The caller holds commit.lock.
func (pt *pubTable) ensure(ctx context.Context, l *Log) (*table.Table, error) {
	tbl, err := pt.load(ctx)
	if errors.Is(err, errNoTable) {
		if err := pt.clearClaim(""); err != nil {
			return nil, err
		}
		tbl, err = pt.create(ctx, l)
	}
	if err != nil {
		return nil, err
	}
	if err := pt.owned(tbl, l); err != nil {
		return nil, err
	}
	return tbl, nil
}

// owned checks the table's log id against the log's.
func (pt *pubTable) owned(tbl *table.Table, l *Log) error {
	if id := tbl.Properties()[propLogID]; id != l.logID {
		return fmt.Errorf("the table at %s belongs to another log (log id %q; this log is %q): streamcast never publishes over another log's history; give this log another published prefix or move that table away", pt.location, id, l.logID)
	}
	// The log's files carry the field ids of this schema.
	if l.iceSc != nil && !tbl.Schema().Equals(l.iceSc) {
		return fmt.Errorf("the table at %s has the schema %s, not the log's %s: it was changed by something other than streamcast; refusing to publish into it", pt.location, tbl.Schema(), l.iceSc)
	}
	return nil
}

func (pt *pubTable) create(ctx context.Context, l *Log) (*table.Table, error) {
	cat, err := pt.catalog()
	if err != nil {
		return nil, err
	}
	ns := table.Identifier{pt.ident[0]}
	if ok, err := cat.CheckNamespaceExists(ctx, ns); err != nil {
		return nil, fmt.Errorf("look for namespace %s under %s: %w", ns[0], pt.warehouse, err)
	} else if !ok {
		if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
			return nil, fmt.Errorf("create namespace %s under %s: %w", ns[0], pt.warehouse, err)
		}
	}
	sc, order, err := l.icebergSchema()
	if err != nil {
		return nil, err
	}
	props := iceberg.Properties{propLogID: l.logID, propPublishedThrough: "0", "format-version": "2"}
	for k, v := range tableProperties {
		props[k] = v
	}
	tbl, err := cat.CreateTable(ctx, pt.ident, sc, catalog.WithSortOrder(order), catalog.WithProperties(props))
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		return pt.load(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("create the published table %s: %w", pt.location, err)
	}
	return tbl, nil
}

var versionName = regexp.MustCompile(`/v([0-9]+)(\.gz)?\.metadata\.json$`)

// clearClaim removes the claim file the hadoop catalog's commit of the
// version after metadata (the first version when metadata is "") would
// take. A claim left by a committer that died blocks that version for a
// minute; commits to a table never overlap (they run under commit.lock),
// so whoever holds the lock knows any claim it finds is such a leftover.
func (pt *pubTable) clearClaim(metadata string) error {
	next := 1
	if metadata != "" {
		m := versionName.FindStringSubmatch(filepath.ToSlash(metadata))
		if m == nil {
			return nil // not a hadoop-catalog name: nothing to clear
		}
		v, err := strconv.Atoi(m[1])
		if err != nil {
			return nil
		}
		next = v + 1
	}
	claim := fmt.Sprintf("%s/v%d.metadata.json.claim", pt.metadataDir(), next)
	if err := pt.remove(claim); err != nil {
		return fmt.Errorf("remove the stale commit claim %s: %w", claim, err)
	}
	return nil
}

// icebergSchema returns the published table's schema (the columns of the
// log's files: streamcast_offset, streamcast_ts, then the declared ones)
// and its sort order (sort_by).
func (l *Log) icebergSchema() (*iceberg.Schema, table.SortOrder, error) {
	sc := l.iceSc
	if sc == nil {
		_, err := table.ArrowSchemaToIcebergWithFreshIDs(fileSchema(l.sch), false)
		return nil, table.SortOrder{}, fmt.Errorf("the log's columns have no Iceberg equivalent: %w", err)
	}
	if len(l.cfg.SortBy) == 0 {
		return sc, table.UnsortedSortOrder, nil
	}
	var fields []table.SortField
	for _, name := range l.cfg.SortBy {
		f, ok := sc.FindFieldByName(name)
		if !ok {
			return nil, table.SortOrder{}, fmt.Errorf("sort_by column %q is not in the table schema", name)
		}
		fields = append(fields, table.SortField{SourceIDs: []int{f.ID}, Transform: iceberg.IdentityTransform{}, Direction: table.SortASC, NullOrder: table.NullsFirst})
	}
	order, err := table.NewSortOrder(1, fields)
	if err != nil {
		return nil, table.SortOrder{}, fmt.Errorf("sort order %v: %w", l.cfg.SortBy, err)
	}
	return sc, order, nil
}

// dataPath returns the location a published copy named name gets.
func (pt *pubTable) dataPath(name string) string {
	if pt.local {
		return filepath.Join(pt.location, "data", name)
	}
	return pt.location + "/data/" + name
}

// metadataDir returns the table's metadata directory.
func (pt *pubTable) metadataDir() string {
	if pt.local {
		return filepath.Join(pt.location, "metadata")
	}
	return pt.location + "/metadata"
}

// upload copies the local file src to dest. A local table gets a hard link
// when it can (files are immutable, so sharing the inode is safe), else a
// copy; either way the file and its directory are fsynced before the commit
// that references them (I3 for the published tier).
func (pt *pubTable) upload(ctx context.Context, src, dest string) error {
	if pt.local {
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return err
		}
		if err := os.Link(src, dest); err == nil {
			return syncDir(filepath.Dir(dest))
		} else if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s exists already: %w", dest, err)
		}
		return copyFile(src, dest)
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	wfs, ok := pt.fsys.(icebergio.WriteFileIO)
	if !ok {
		return fmt.Errorf("%s cannot be written to", pt.location)
	}
	w, err := wfs.Create(dest)
	if err != nil {
		return err
	}
	if _, err := w.ReadFrom(f); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

// copyFile copies src to a new file dest and fsyncs it and its directory.
func copyFile(src, dest string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dest))
}

// readAtFile is what reading a Parquet file needs.
type readAtFile interface {
	io.ReaderAt
	io.Seeker
	io.Closer
}

// open opens a published data file for reading.
func (pt *pubTable) open(p string) (readAtFile, error) {
	if pt.local {
		return os.Open(p)
	}
	return pt.fsys.Open(p)
}

// remove deletes a published object; one already gone is not an error.
func (pt *pubTable) remove(p string) error {
	var err error
	if pt.local {
		err = os.Remove(p)
	} else {
		err = pt.fsys.Remove(p)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// objectInfo is a listed object of the table's metadata directory.
type objectInfo struct {
	path    string
	modTime time.Time
}

// listMetadata lists the objects of the table's metadata directory.
func (pt *pubTable) listMetadata() ([]objectInfo, error) {
	var out []objectInfo
	dir := pt.metadataDir()
	if pt.local {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue // deleted meanwhile
			}
			out = append(out, objectInfo{filepath.Join(dir, e.Name()), info.ModTime()})
		}
		return out, nil
	}
	lfs, ok := pt.fsys.(icebergio.ListableIO)
	if !ok {
		return nil, fmt.Errorf("%s cannot be listed", dir)
	}
	err := lfs.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() {
			if strings.TrimRight(p, "/") == dir {
				return nil
			}
			return fs.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		out = append(out, objectInfo{p, info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// liveSet is every object the table's current metadata reaches: metadata
// files (current and logged), the version hint, manifest lists and
// manifests of every snapshot it keeps, and their data files.
// Keys are normalised locations (see norm), values the locations as the
// metadata spells them.
type liveSet map[string]string

// add records a location.
func (s liveSet) add(pt *pubTable, p string) { s[pt.norm(p)] = p }

// has reports whether p is in the set.
func (s liveSet) has(pt *pubTable, p string) bool {
	_, ok := s[pt.norm(p)]
	return ok
}

// live computes the live set of tbl. Manifests are immutable, so their
// contents are cached across calls.
func (pt *pubTable) live(ctx context.Context, tbl *table.Table) (liveSet, error) {
	set, err := pt.snapshotRefs(ctx, tbl)
	if err != nil {
		return nil, err
	}
	set.add(pt, tbl.MetadataLocation())
	for e := range tbl.Metadata().PreviousFiles() {
		set.add(pt, e.MetadataFile)
	}
	set.add(pt, pt.metadataDir()+"/version-hint.text")
	return set, nil
}

// snapshotRefs returns the manifest lists, manifests and data files of the
// snapshots tbl keeps.
func (pt *pubTable) snapshotRefs(ctx context.Context, tbl *table.Table) (liveSet, error) {
	set := liveSet{}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	for _, snap := range tbl.Metadata().Snapshots() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if snap.ManifestList != "" {
			set.add(pt, snap.ManifestList)
		}
		mans, err := snap.Manifests(fsys)
		if err != nil {
			return nil, fmt.Errorf("read the manifest list of snapshot %d: %w", snap.SnapshotID, err)
		}
		for _, m := range mans {
			set.add(pt, m.FilePath())
			files, err := pt.manifestFiles(fsys, m)
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				set.add(pt, f)
			}
		}
	}
	return set, nil
}

// manifestFiles returns the data files a manifest lists as added or
// existing. An entry marked deleted names a file the snapshot no longer
// reads; an older snapshot that still reads it lists it in a manifest of
// its own.
func (pt *pubTable) manifestFiles(fsys icebergio.IO, m iceberg.ManifestFile) ([]string, error) {
	pt.manMu.Lock()
	files, ok := pt.manifests[m.FilePath()]
	pt.manMu.Unlock()
	if ok {
		return files, nil
	}
	entries, err := m.FetchEntries(fsys, true)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
	}
	files = make([]string, 0, len(entries))
	for _, e := range entries {
		files = append(files, e.DataFile().FilePath())
	}
	pt.manMu.Lock()
	if len(pt.manifests) > 100_000 {
		clear(pt.manifests)
	}
	pt.manifests[m.FilePath()] = files
	pt.manMu.Unlock()
	return files, nil
}

// norm gives one spelling of a location, so that a local path and its
// file:// URL compare equal.
func (pt *pubTable) norm(p string) string {
	if pt.local {
		if rest, ok := strings.CutPrefix(p, "file://"); ok {
			p = rest
		}
		return filepath.Clean(p)
	}
	if strings.HasPrefix(p, "s3a://") || strings.HasPrefix(p, "s3n://") {
		p = "s3://" + p[len("s3a://"):]
	}
	return strings.TrimSuffix(path.Clean(strings.Replace(p, "://", ":/", 1)), "/")
}
