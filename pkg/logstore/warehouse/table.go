package warehouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
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

	"github.com/streamcast/streamcast/internal/durable"
)

// Properties streamcast keeps on the published table and its snapshots.
const (
	// PropLogID names the log that owns the table (meta log_id): a log
	// never publishes into a table another log created (I8).
	PropLogID = "streamcast.log-id"
	// PropPublishedThrough is the last offset the table holds; every
	// offset from the first up to it is there exactly once.
	PropPublishedThrough = "streamcast.published-through"
	// PropPass is the token of the publish pass that made the latest
	// publishing commit; publish reconciles its intents against it.
	PropPass = "streamcast.pass"
	// PropMarks is the location of the exactly-once marks as of the
	// table's published-through offset, written by the publish pass that
	// made the commit (a small JSON file in the table's metadata
	// directory), so a restore from the table alone brings back marks
	// that match its rows.
	PropMarks = "streamcast.marks"
	// PropRestored is stamped by the commit with which a restored log
	// takes the table over: the restore's token.
	PropRestored = "streamcast.restored"
	// SummaryOffsets is the snapshot summary entry naming the offset range
	// a publishing commit added or replaced, [start,end).
	SummaryOffsets = "streamcast.offsets"
)

// TableProperties returns the properties set when the table is created
// and re-applied by every publishing commit: they bound the growth of
// metadata (old metadata files are deleted after each commit, ten are
// kept, manifests are merged). The map is new at each call.
func TableProperties() iceberg.Properties {
	return iceberg.Properties{
		table.MetadataDeleteAfterCommitEnabledKey: "true",
		table.MetadataPreviousVersionsMaxKey:      "10",
		"commit.manifest-merge.enabled":           "true",
		"commit.manifest.min-count-to-merge":      "2",
	}
}

// Table is a log's published Iceberg table: where it lives and the IO
// that reaches it. The table itself is loaded fresh by each step that
// needs it; data files are read straight from the locations buffer.db
// records, without loading table metadata.
type Table struct {
	warehouse string           // the catalog warehouse: the prefix (s3://… or an absolute directory)
	location  string           // the table: <warehouse>/<stream>/<log>
	uri       string           // location as the table's metadata spells it: a file:// URL for a local table
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

// S3 says how to reach an s3:// prefix: warehouse.S3 without its
// config tags.
type S3 struct {
	// Endpoint is the service URL, such as http://127.0.0.1:7070; empty
	// means AWS itself (or AWS_S3_ENDPOINT).
	Endpoint string `json:"endpoint,omitempty" yaml:"endpoint"`
	// Region is the bucket's region; empty means AWS_REGION or the profile's.
	Region string `json:"region,omitempty" yaml:"region"`
	// PathStyle addresses buckets as <endpoint>/<bucket> instead of
	// <bucket>.<endpoint>; most S3-compatible servers want it. It is the
	// default whenever Endpoint is set.
	PathStyle bool `json:"path_style,omitempty" yaml:"path_style"`
}

// Owner is the log a table belongs to: a table is only ever published
// into by the log that created it (I8).
type Owner struct {
	// LogID is the log's id (meta log_id), stored on the table it creates.
	LogID string
	// Schema is the schema the log's files carry field ids of; nil skips
	// the check.
	Schema *iceberg.Schema
	// Columns returns the schema and sort order a new table gets.
	Columns func() (*iceberg.Schema, table.SortOrder, error)
}

// SortOrder returns the sort order of a table whose rows are sorted by the
// columns sortBy of sc (unsorted when there are none).
func SortOrder(sc *iceberg.Schema, sortBy []string) (table.SortOrder, error) {
	if len(sortBy) == 0 {
		return table.UnsortedSortOrder, nil
	}
	var fields []table.SortField
	for _, name := range sortBy {
		f, ok := sc.FindFieldByName(name)
		if !ok {
			return table.SortOrder{}, fmt.Errorf("sort_by column %q is not in the table schema", name)
		}
		fields = append(fields, table.SortField{SourceIDs: []int{f.ID}, Transform: iceberg.IdentityTransform{}, Direction: table.SortASC, NullOrder: table.NullsFirst})
	}
	order, err := table.NewSortOrder(1, fields)
	if err != nil {
		return table.SortOrder{}, fmt.Errorf("sort order %v: %w", sortBy, err)
	}
	return order, nil
}

// NewTable places the table of the log named stream/log under the
// prefix p, reached through s3 when p is an s3:// URL.
func NewTable(p Location, stream, log string, s3 S3) (*Table, error) {
	pt := &Table{ident: table.Identifier{stream, log}, props: iceberg.Properties{}, manifests: map[string][]string{}}
	pt.location = p.Join(stream, log)
	switch {
	case p.S3 != "":
		pt.warehouse = p.S3
		// The hadoop catalog's commit is not atomic on an object store;
		// it is safe here because commits to one table never overlap:
		// they run under the log's commit.lock (see logstore's CommitLock).
		pt.props["allow-unsafe-commits"] = "true"
		pt.props[icebergio.S3ConnectTimeout] = "10"
		if s3.Region != "" {
			pt.props[icebergio.S3Region] = s3.Region
		}
		if s3.Endpoint != "" {
			pt.props[icebergio.S3EndpointURL] = s3.Endpoint
		}
		if s3.PathStyle || s3.Endpoint != "" {
			pt.props[icebergio.S3ForceVirtualAddressing] = "false"
		}
	default:
		pt.warehouse = p.Dir
		pt.local = true
	}
	pt.uri = pt.location
	if pt.local {
		pt.uri = FileURI(pt.location)
	}
	// The IO outlives any one call: blob IO keeps the context it was made
	// with for every request.
	var err error
	pt.fsys, err = icebergio.LoadFS(context.Background(), pt.props, pt.location)
	if err != nil {
		return nil, fmt.Errorf("reach %s: %w", pt.location, err)
	}
	return pt, nil
}

// Location returns where the table lives: <prefix>/<stream>/<log>, as an
// s3:// URL or an absolute directory.
func (pt *Table) Location() string { return pt.location }

// Local reports whether the table lives in a local directory.
func (pt *Table) Local() bool { return pt.local }

// URI returns the table's location as its metadata spells it: the s3://
// URL, or for a local table a file:// URL. Readers whose default file
// system is not the local one (Spark on HDFS, Trino) resolve a bare path
// against their own, so a local table names every file it references, its
// own location included, by a file:// URL.
func (pt *Table) URI() string { return pt.uri }

// FileURI spells the absolute local path p as a file:// URL
// (file:///abs/path), escaped as a URL path is.
func FileURI(p string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(p)}).String()
}

// LocalPath returns the local path a location of a local table names:
// the path of a file:// URL (file:///abs/path, or file:/abs/path as
// Hadoop writes it), unescaped; a bare path, as tables written before
// their locations were URLs hold, as it is.
func LocalPath(p string) string {
	if !strings.HasPrefix(p, "file:") {
		return p
	}
	u, err := url.Parse(p)
	if err != nil || u.Path == "" || (u.Host != "" && u.Host != "localhost") {
		return p // no path of this machine: fails where it is used, naming p
	}
	return filepath.FromSlash(u.Path)
}

// catalog returns the hadoop catalog over the prefix.
func (pt *Table) catalog() (*hadoop.Catalog, error) {
	pt.catOnce.Do(func() {
		pt.cat, pt.catErr = hadoop.NewCatalog("streamcast", pt.warehouse, pt.props)
		if pt.catErr != nil {
			pt.catErr = fmt.Errorf("open the catalog at %s: %w", pt.warehouse, pt.catErr)
		}
	})
	return pt.cat, pt.catErr
}

func (pt *Table) Close() {
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

// ErrNoTable reports that the published table does not exist (yet).
var ErrNoTable = errors.New("the published table does not exist")

// Load loads the table's current metadata; ErrNoTable when there is none.
func (pt *Table) Load(ctx context.Context) (*table.Table, error) {
	cat, err := pt.catalog()
	if err != nil {
		return nil, err
	}
	tbl, err := cat.LoadTable(ctx, pt.ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, fmt.Errorf("%s: %w", pt.location, ErrNoTable)
	}
	if err != nil {
		return nil, fmt.Errorf("load the published table %s: %w", pt.location, err)
	}
	return tbl, nil
}

// Ensure loads the table, creating it (and its namespace) when missing,
// and checks that it is this log's: a table at the location that another
// log created is never published into (I8). The caller holds commit.lock.
func (pt *Table) Ensure(ctx context.Context, o Owner) (*table.Table, error) {
	tbl, err := pt.Load(ctx)
	if errors.Is(err, ErrNoTable) {
		if err := pt.ClearClaim(""); err != nil {
			return nil, err
		}
		tbl, err = pt.create(ctx, o)
	}
	if err != nil {
		return nil, err
	}
	if err := pt.Owned(tbl, o); err != nil {
		return nil, err
	}
	return tbl, nil
}

// Owned checks the table's log id against the log's.
func (pt *Table) Owned(tbl *table.Table, o Owner) error {
	if id := tbl.Properties()[PropLogID]; id != o.LogID {
		return fmt.Errorf("the table at %s belongs to another log (log id %q; this log is %q): streamcast never publishes over another log's history; give this log another published prefix or move that table away", pt.location, id, o.LogID)
	}
	// The log's files carry the field ids of this schema.
	if o.Schema != nil && !tbl.Schema().Equals(o.Schema) {
		return fmt.Errorf("the table at %s has the schema %s, not the log's %s: it was changed by something other than streamcast; refusing to publish into it", pt.location, tbl.Schema(), o.Schema)
	}
	return nil
}

func (pt *Table) create(ctx context.Context, o Owner) (*table.Table, error) {
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
	sc, order, err := o.Columns()
	if err != nil {
		return nil, err
	}
	props := iceberg.Properties{PropLogID: o.LogID, PropPublishedThrough: "0", "format-version": "2"}
	for k, v := range TableProperties() {
		props[k] = v
	}
	// The catalog's CreateTable would record the location as a bare path
	// for a local table, and its commits refuse to change a location. Its
	// commit of a table that does not exist yet takes the location we
	// give, and iceberg-go derives the manifest lists' and manifests'
	// locations from it: file:// URLs throughout.
	md, err := table.NewMetadata(sc, iceberg.UnpartitionedSpec, order, pt.uri, props)
	if err != nil {
		return nil, fmt.Errorf("create the published table %s: %w", pt.location, err)
	}
	_, _, err = cat.CommitTable(ctx, pt.ident, []table.Requirement{table.AssertCreate()}, createUpdates(md))
	switch {
	case errors.Is(err, catalog.ErrTableAlreadyExists) || errors.Is(err, table.ErrCommitFailed):
		return pt.Load(ctx) // another creator won: Owned decides
	case err != nil:
		return nil, fmt.Errorf("create the published table %s: %w", pt.location, err)
	}
	return pt.Load(ctx)
}

// createUpdates are the updates that make md from nothing, as a catalog's
// create-transaction commits them. The catalog starts a new table from an
// empty schema (id 0), which the last update drops: md's schema is the
// table's only one.
func createUpdates(md table.Metadata) []table.Update {
	spec, order := md.PartitionSpec(), md.SortOrder()
	return []table.Update{
		table.NewAssignUUIDUpdate(md.TableUUID()),
		table.NewUpgradeFormatVersionUpdate(md.Version()),
		table.NewAddSchemaUpdate(md.CurrentSchema()),
		table.NewSetCurrentSchemaUpdate(-1),
		table.NewAddPartitionSpecUpdate(&spec, true),
		table.NewSetDefaultSpecUpdate(-1),
		table.NewAddSortOrderUpdate(&order),
		table.NewSetDefaultSortOrderUpdate(-1),
		table.NewSetLocationUpdate(md.Location()),
		table.NewSetPropertiesUpdate(md.Properties()),
		table.NewRemoveSchemasUpdate([]int{0}),
	}
}

var versionName = regexp.MustCompile(`/v([0-9]+)(\.gz)?\.metadata\.json$`)

// ClearClaim removes the claim file the hadoop catalog's commit of the
// version after metadata (the first version when metadata is "") would
// take. A claim left by a committer that died blocks that version for a
// minute; commits to a table never overlap (they run under commit.lock),
// so whoever holds the lock knows any claim it finds is such a leftover.
func (pt *Table) ClearClaim(metadata string) error {
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
	claim := fmt.Sprintf("%s/v%d.metadata.json.claim", pt.MetadataDir(), next)
	if err := pt.Remove(claim); err != nil {
		return fmt.Errorf("remove the stale commit claim %s: %w", claim, err)
	}
	return nil
}

// DataPath returns the location a published copy named name gets, as
// the table's manifests name it (a file:// URL for a local table).
func (pt *Table) DataPath(name string) string {
	if pt.local {
		return FileURI(filepath.Join(pt.location, "data", name))
	}
	return pt.location + "/data/" + name
}

// MarksSuffix ends the name of every marks file.
const MarksSuffix = ".marks.json"

// MarksPath returns the location of the marks file of publish pass pass:
// in the metadata directory, where the sweep of unreferenced metadata
// takes the ones no commit names any more.
func (pt *Table) MarksPath(pass string) string {
	if pt.local {
		return FileURI(filepath.Join(pt.MetadataDir(), "streamcast-"+pass+MarksSuffix))
	}
	return pt.MetadataDir() + "/streamcast-" + pass + MarksSuffix
}

// MetadataDir returns the table's metadata directory.
func (pt *Table) MetadataDir() string {
	if pt.local {
		return filepath.Join(pt.location, "metadata")
	}
	return pt.location + "/metadata"
}

// Upload copies the local file src to dest. A local table gets a hard link
// when it can (files are immutable, so sharing the inode is safe), else a
// copy; either way the file and its directory are fsynced before the commit
// that references them (I3 for the published tier).
func (pt *Table) Upload(ctx context.Context, src, dest string) error {
	if pt.local {
		dest = LocalPath(dest)
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return err
		}
		if err := os.Link(src, dest); err == nil {
			return durable.SyncDir(filepath.Dir(dest))
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
	return durable.SyncDir(filepath.Dir(dest))
}

// File is what reading a Parquet file needs.
type File interface {
	io.ReaderAt
	io.Seeker
	io.Closer
}

// OpenFile opens a published data file for reading.
func (pt *Table) OpenFile(p string) (File, error) {
	if pt.local {
		return os.Open(LocalPath(p))
	}
	return pt.fsys.Open(p)
}

// Size returns the size in bytes of a published data file, with one
// HEAD request on S3 and without reading its bytes. A file that is not
// there returns an error wrapping fs.ErrNotExist.
func (pt *Table) Size(p string) (int64, error) {
	if pt.local {
		st, err := os.Stat(LocalPath(p))
		if err != nil {
			return 0, err
		}
		return st.Size(), nil
	}
	if sfs, ok := pt.fsys.(icebergio.StatIO); ok {
		st, err := sfs.Stat(p)
		if err != nil {
			return 0, err
		}
		return st.Size(), nil
	}
	// An IO without Stat: opening the object fetches its attributes.
	f, err := pt.fsys.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// Remove deletes a published object; one already gone is not an error.
func (pt *Table) Remove(p string) error {
	var err error
	if pt.local {
		err = os.Remove(LocalPath(p))
	} else {
		err = pt.fsys.Remove(p)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Object is a listed object of the table's metadata directory.
type Object struct {
	Path    string
	ModTime time.Time
}

// ListMetadata lists the objects of the table's metadata directory.
func (pt *Table) ListMetadata() ([]Object, error) {
	var out []Object
	dir := pt.MetadataDir()
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
			out = append(out, Object{filepath.Join(dir, e.Name()), info.ModTime()})
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
		out = append(out, Object{p, info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LiveSet is every object the table's current metadata reaches: metadata
// files (current and logged), the version hint, manifest lists and
// manifests of every snapshot it keeps, and their data files.
// Keys are normalised locations (see Norm), values the locations as the
// metadata spells them.
type LiveSet map[string]string

// Add records a location.
func (s LiveSet) Add(pt *Table, p string) { s[pt.Norm(p)] = p }

// Has reports whether p is in the set.
func (s LiveSet) Has(pt *Table, p string) bool {
	_, ok := s[pt.Norm(p)]
	return ok
}

// Live computes the live set of tbl. Manifests are immutable, so their
// contents are cached across calls.
func (pt *Table) Live(ctx context.Context, tbl *table.Table) (LiveSet, error) {
	set, err := pt.SnapshotRefs(ctx, tbl)
	if err != nil {
		return nil, err
	}
	set.Add(pt, tbl.MetadataLocation())
	for e := range tbl.Metadata().PreviousFiles() {
		set.Add(pt, e.MetadataFile)
	}
	set.Add(pt, pt.MetadataDir()+"/version-hint.text")
	if m := tbl.Properties()[PropMarks]; m != "" {
		set.Add(pt, m) // the marks as of the table's end: a restore reads them
	}
	return set, nil
}

// SnapshotRefs returns the manifest lists, manifests and data files of the
// snapshots tbl keeps.
func (pt *Table) SnapshotRefs(ctx context.Context, tbl *table.Table) (LiveSet, error) {
	set := LiveSet{}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	for _, snap := range tbl.Metadata().Snapshots() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if snap.ManifestList != "" {
			set.Add(pt, snap.ManifestList)
		}
		mans, err := snap.Manifests(fsys)
		if err != nil {
			return nil, fmt.Errorf("read the manifest list of snapshot %d: %w", snap.SnapshotID, err)
		}
		for _, m := range mans {
			set.Add(pt, m.FilePath())
			files, err := pt.manifestFiles(fsys, m)
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				set.Add(pt, f)
			}
		}
	}
	return set, nil
}

// CurrentFiles returns the data files tbl's current snapshot reads.
func (pt *Table) CurrentFiles(ctx context.Context, tbl *table.Table) (LiveSet, error) {
	set := LiveSet{}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return set, nil
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	mans, err := snap.Manifests(fsys)
	if err != nil {
		return nil, fmt.Errorf("read the manifest list of snapshot %d: %w", snap.SnapshotID, err)
	}
	for _, m := range mans {
		files, err := pt.manifestFiles(fsys, m)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			set.Add(pt, f)
		}
	}
	return set, nil
}

// manifestFiles returns the data files a manifest lists as added or
// existing. An entry marked deleted names a file the snapshot no longer
// reads; an older snapshot that still reads it lists it in a manifest of
// its own.
func (pt *Table) manifestFiles(fsys icebergio.IO, m iceberg.ManifestFile) ([]string, error) {
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

// Norm gives one spelling of a location, so that a local path and its
// file:// URL (escaped or not, file:/// or file:/) compare equal: a table
// written before its locations were URLs names its files by bare paths,
// and its newer commits by URLs, and a cleaner comparing the two spellings
// would delete a live file or never delete garbage.
func (pt *Table) Norm(p string) string {
	if pt.local {
		return filepath.Clean(LocalPath(p))
	}
	if strings.HasPrefix(p, "s3a://") || strings.HasPrefix(p, "s3n://") {
		p = "s3://" + p[len("s3a://"):]
	}
	return strings.TrimSuffix(path.Clean(strings.Replace(p, "://", ":/", 1)), "/")
}
