package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
)

// revive continues the retired stream of pub on its next log
// (meta.NextLogName), from exactly the retired end offset, with the
// retired log's columns and sort order and its exactly-once marks, on
// this machine or another: the marks come from the retired log when this
// root holds it, else from its table's marks file, which retire's last
// publish wrote as of the end. The steps and the marker are restore's: a
// revive killed at any step finishes when it runs again.
func revive(ctx context.Context, s Stream, o RestoreOptions, store *meta.Store, pub *meta.Metadata, plan restorePlan, resumed bool) (*Restored, error) {
	const what = "revive"
	marker := filepath.Join(s.Layout.StreamDir(s.Name), markerFile)
	if resumed {
		if done, err := restoreCommitted(ctx, store, pub, plan, marker); done || err != nil {
			if err != nil {
				return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
			}
			return restoredFrom(s.Name, plan, pub, true), nil
		}
	}
	if pub.Intent != nil {
		return nil, fmt.Errorf("%s stream %q: its metadata version %d records an interrupted %s; finish it first (`streamcast %s %s`): %w",
			what, s.Name, pub.Version, pub.Intent.Kind, pub.Intent.Kind, s.Name, ErrRestoreRefused)
	}
	old := pub.Current()
	if !resumed {
		plan = restorePlan{Log: pub.NextLogName(), LogID: old.LogID, At: o.Clock.Now().UnixMicro(), Token: logstore.NewToken(),
			From: FromRevive, Resume: pub.Retirement.EndOffset}
		if err := writePlan(marker, plan); err != nil {
			return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
		}
	}
	o.after(StepMarker)

	t0 := time.Now()
	o.progress("creating log " + plan.Log)
	sch, err := planSchema(migratePlan{Schema: old.Schema})
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: the schema the metadata records for log %s: %w", what, s.Name, old.Name, err)
	}
	cfg := o.Log
	cfg.Stream, cfg.Log, cfg.Start, cfg.SortBy = s.Name, plan.Log, plan.Resume, orEmpty(old.SortBy)
	cfg.Published = s.Layout.StoredPublished(s.Name, plan.Log)
	next, err := openNext(s.Layout.LogDir(s.Name, plan.Log), sch, cfg, o.Options)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	defer next.Close()
	o.after(StepDownloaded)

	o.progress("carrying the exactly-once marks")
	marks, err := retiredMarks(ctx, s, old)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	if err := next.ImportMarks(ctx, marks); err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	rebuild := time.Since(t0)
	o.after(StepRebuilt)

	t0 = time.Now()
	o.progress("committing the metadata")
	desc, err := meta.DescribeLog(next, plan.Resume)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	m := pub.Clone()
	prev := m.Current()
	prev.State, prev.EndOffset = meta.Sealed, &plan.Resume
	m.Retirement = nil
	if err := m.AddLog(desc, sch); err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	m.Restores = append(m.Restores, meta.Restore{At: plan.At, Log: plan.Log, From: FromRevive})
	got, err := commitRestore(ctx, o.Options, store, m, marker)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	o.after(StepCommitted)
	out := restoredFrom(s.Name, plan, got, resumed)
	out.Hole = logstore.Span{}
	out.Marks, out.Rebuild, out.Commit = len(marks), rebuild, time.Since(t0)
	return out, nil
}

// retiredMarks returns the exactly-once marks of the retired log old: its
// own when this root holds it, else those its table's last publish wrote
// beside it (retire publishes every row, so they are as of its end).
func retiredMarks(ctx context.Context, s Stream, old *meta.Log) ([]logstore.Mark, error) {
	dir := s.Layout.LogDir(s.Name, old.Name)
	lg, err := logstore.Open(dir, logstore.ReadOnly)
	if err == nil {
		defer lg.Close()
		return lg.Marks(ctx)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	pt, err := tableOf(s, old)
	if err != nil {
		return nil, err
	}
	tab, err := logstore.ReadTable(ctx, pt)
	if err != nil {
		return nil, fmt.Errorf("read the marks of the retired log %s from its table: %w", old.Name, err)
	}
	marks := []logstore.Mark{}
	for _, m := range tab.Marks.Marks {
		marks = append(marks, logstore.Mark{Publisher: m.Publisher, LastSeq: m.LastSeq, LastOffset: m.LastOffset})
	}
	return marks, nil
}

// tableOf returns the published table of the stream's log lg.
func tableOf(s Stream, lg *meta.Log) (*warehouse.Table, error) {
	return warehouse.NewTable(s.Layout.Published(), s.Name, lg.Name, s.S3)
}
