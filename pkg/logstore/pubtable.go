package logstore

import (
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// published returns the log's published table handle, made on first use.
func (l *Log) published() (*warehouse.Table, error) {
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
	return pt.Location(), nil
}

// newPubTable places the table of the log in dir: under the prefix the log
// stores (PublishedPrefix), named by the stream and log names it stores,
// never by where the directory sits now, so a log moved elsewhere keeps
// publishing to its own table.
func newPubTable(dir string, cfg Config) (*warehouse.Table, error) {
	stream, log, err := cfg.names()
	if err != nil {
		return nil, err
	}
	p, err := cfg.PublishedPrefix(dir)
	if err != nil {
		return nil, err
	}
	return warehouse.NewTable(p, stream, log, cfg.S3)
}

// owner is the log as the owner of its published table (I8).
func (l *Log) owner() warehouse.Owner {
	return warehouse.Owner{LogID: l.logID, Schema: l.iceSc, Columns: l.icebergSchema}
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
	order, err := warehouse.SortOrder(sc, l.cfg.SortBy)
	return sc, order, err
}
