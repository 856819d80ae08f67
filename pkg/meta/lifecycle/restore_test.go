//go:build linux

package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/schema/source"
)

// lostMachine gives the fixture's log published rows [1, 51) and
// unpublished rows [51, 71), all of publisher p (mark seq 70 at offset
// 70, seq 50 at offset 50 as of the table's end); with ship, a replicator ships its WAL until all 70 rows are in the
// replica. Then the root is wiped, as a lost machine leaves it; the
// published prefix (outside the root) survives.
func lostMachine(t *testing.T, ship bool) *fixture {
	t.Helper()
	return lostMachineAt(t, "file", ship)
}

// lostMachineAt is lostMachine with the published prefix of kind ("file",
// "beside" or "s3", on versitygw; see newFixture).
func lostMachineAt(t *testing.T, kind string, ship bool) *fixture {
	t.Helper()
	ctx := context.Background()
	if kind == "s3" {
		// litestream's S3 client cannot load a CA bundle (cmd moves
		// AWS_CA_BUNDLE to SSL_CERT_FILE for it); versitygw is plain HTTP.
		t.Setenv("AWS_CA_BUNDLE", "")
	}
	f := newFixture(t, kind, 50)
	dir := f.lay.LogDir(stream, stream)
	lg, err := logstore.Open(dir, logstore.Writer)
	if err != nil {
		t.Fatal(err)
	}
	// Rows [51, 71) land between the seal and the publish pass of [1, 51):
	// the pass must write p's mark as of offset 50, not its latest.
	if _, err := lg.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	appendRows(t, lg, 50, 20, false)
	if n, err := lg.Publish(ctx, true); err != nil || n != 50 {
		t.Fatalf("publish: %d rows, %v; want 50", n, err)
	}
	if ship {
		tg, err := replica.TargetFor(dir, f.dest)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- replica.Run(rctx, []replica.Target{tg}, replica.Options{SyncInterval: 20 * time.Millisecond}, nil)
		}()
		deadline := time.Now().Add(time.Minute)
		for {
			p, ok, err := replica.ReadProgress(dir)
			if err != nil {
				t.Fatal(err)
			}
			if ok && p.ShippedEnd >= 71 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the replicator shipped %+v after a minute, want offsets below 71", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(f.root); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(f.root, 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) restore(t *testing.T) (*lifecycle.Restored, error) {
	t.Helper()
	return lifecycle.Restore(context.Background(), f.stream(), lifecycle.RestoreOptions{Log: f.logConfig("", nil), Replica: f.dest})
}

// scanOffsets returns every offset a scan of the whole log yields.
func scanOffsets(t *testing.T, lg *logstore.Log) []int64 {
	t.Helper()
	ctx := context.Background()
	earliest, end, err := lg.Extent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	if err := lg.Scan(ctx, earliest, end, nil, func(off, _ int64, _ []byte) error {
		got = append(got, off)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func span(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// checkRestored checks a restored log: it holds exactly the offsets held,
// its next offset is resume, the hole is recorded in buffer.db and in the
// metadata, the marks are want, and a row appended after the restore
// takes offset resume and publishes after the hole.
func checkRestored(t *testing.T, f *fixture, r *lifecycle.Restored, held []int64, resume int64, want logstore.Mark) {
	t.Helper()
	ctx := context.Background()
	if r.Resume != resume || r.Hole != (logstore.Span{Start: held[len(held)-1] + 1, End: resume}) {
		t.Fatalf("restored %+v, want resume %d after a hole from %d", r, resume, held[len(held)-1]+1)
	}
	lg, err := logstore.Open(f.lay.LogDir(stream, stream), logstore.Writer)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	if got := scanOffsets(t, lg); !slices.Equal(got, held) {
		t.Fatalf("the restored log yields offsets %v, want %v", got, held)
	}
	if hs, err := lg.Holes(ctx); err != nil || len(hs) != 1 || hs[0] != r.Hole {
		t.Fatalf("holes %v %v, want [%v]", hs, err, r.Hole)
	}
	marks, err := lg.Marks(ctx)
	if err != nil || len(marks) != 1 || marks[0] != want {
		t.Fatalf("marks %+v %v, want [%+v]", marks, err, want)
	}
	md := f.loadPublished(t)
	if hs := md.Current().Holes; len(hs) != 1 || hs[0].From != r.Hole.Start || hs[0].To != r.Hole.End {
		t.Fatalf("the metadata records holes %+v, want [%v]", hs, r.Hole)
	}
	if len(md.Restores) != 1 || md.Restores[0].From != r.From {
		t.Fatalf("the metadata records restores %+v", md.Restores)
	}
	if home := f.load(t); home.Version != md.Version {
		t.Fatalf("home at version %d, published at %d", home.Version, md.Version)
	}
	// No offset at or below the old writer's end is issued again (I1).
	first, err := lg.Append(ctx, [][]byte{row(1000, false)}, 1700000001000000, []logstore.Mark{{Publisher: "p", LastSeq: want.LastSeq + 1, LastOffset: resume}})
	if err != nil || first != resume {
		t.Fatalf("append after the restore: offset %d, %v; want %d", first, err, resume)
	}
	n, err := lg.CountRows(ctx, 1, resume+1)
	if err != nil || n != int64(len(held))+1 {
		t.Fatalf("count %d %v, want %d", n, err, len(held)+1)
	}
	// Publishing resumes: the table takes the rows held and the new one,
	// stepping over the hole.
	if end, err := lg.PublishAll(ctx); err != nil || end != resume+1 {
		t.Fatalf("publish all after the restore: end %d, %v", end, err)
	}
	pub := f.publishedOffsets(t, stream)
	for _, o := range append(slices.Clone(held), resume) {
		if !pub[o] {
			t.Fatalf("the table lacks offset %d after publishing", o)
		}
	}
	if len(pub) != len(held)+1 {
		t.Fatalf("the table holds %d offsets, want %d", len(pub), len(held)+1)
	}
}

// TestRestoreFromTheTableAloneFencesPastItsEnd: with no replica the rows
// never published are lost, the log resumes 2^40 past the table's end,
// and the marks are the table's, exactly as of its last row.
func TestRestoreFromTheTableAloneFencesPastItsEnd(t *testing.T) {
	f := lostMachine(t, false)
	r, err := f.restore(t)
	if err != nil {
		t.Fatal(err)
	}
	if r.From != lifecycle.FromTable || r.PublishedEnd != 51 {
		t.Fatalf("restored %+v, want from the table, P = 51", r)
	}
	if want := filepath.Join(f.dest.Location.Dir, stream, stream); r.ReplicaAt != want {
		t.Fatalf("the restore says it looked for a replica at %q, want %q", r.ReplicaAt, want)
	}
	checkRestored(t, f, r, span(1, 51), 51+lifecycle.FenceTable, logstore.Mark{Publisher: "p", LastSeq: 50, LastOffset: 50})
}

// TestRestoreLooksWhereItIsTold: a restore given no destination looks
// beside the tables, finds nothing there though the replica exists
// elsewhere, says where it looked, and restores from the table alone.
func TestRestoreLooksWhereItIsTold(t *testing.T) {
	f := lostMachine(t, true)
	f.dest = replica.Destination{}
	r, err := f.restore(t)
	if err != nil {
		t.Fatal(err)
	}
	if want := f.lay.Published().Join(stream, replica.WALDir, stream); r.From != lifecycle.FromTable || r.ReplicaAt != want {
		t.Fatalf("restored %+v, want from the table, having looked at %s", r, want)
	}
}

// TestRestoreFromTheReplicaKeepsEveryShippedRow: every row the replica
// shipped is back at its offset, the log resumes 2^20 past the replica's
// end, and the marks are the replica's; at a destination of its own, in a
// directory or on S3, and beside the tables where configs without a
// destination keep it.
func TestRestoreFromTheReplicaKeepsEveryShippedRow(t *testing.T) {
	for _, kind := range []string{"file", "s3", "beside"} {
		t.Run(kind, func(t *testing.T) {
			f := lostMachineAt(t, kind, true)
			r, err := f.restore(t)
			if err != nil {
				t.Fatal(err)
			}
			if r.From != lifecycle.FromReplica || r.ReplicaEnd != 71 || r.PublishedEnd != 51 {
				t.Fatalf("restored %+v, want from the replica, R = 71, P = 51", r)
			}
			want := replica.Locate(f.dest.Location, f.lay.Published(), stream, stream).String()
			if kind != "beside" && !strings.HasSuffix(want, "/replica/"+stream+"/"+stream) {
				t.Fatalf("the replica is at %s, not under the fixture's destination", want)
			}
			if r.ReplicaAt != want {
				t.Fatalf("the restore says it took the replica from %q, want %q", r.ReplicaAt, want)
			}
			checkRestored(t, f, r, span(1, 71), 71+lifecycle.FenceReplica, logstore.Mark{Publisher: "p", LastSeq: 70, LastOffset: 70})
		})
	}
}

// TestRestoreRefusals: each refusal names what it found and changes
// nothing.
func TestRestoreRefusals(t *testing.T) {
	t.Run("the home holds the stream", func(t *testing.T) {
		f := newFixture(t, "file", 5)
		_, err := f.restore(t)
		if !errors.Is(err, lifecycle.ErrRestoreRefused) {
			t.Fatalf("got %v, want a refusal", err)
		}
		if _, err := os.Stat(filepath.Join(f.lay.LogDir(stream, stream), logstore.BufferFile)); err != nil {
			t.Fatalf("the log is gone after the refusal: %v", err)
		}
	})
	t.Run("the prefix holds nothing", func(t *testing.T) {
		f := newFixture(t, "file", 5)
		f.pub = "file://" + filepath.Join(t.TempDir(), "empty")
		other, err := meta.NewLayout(f.root, f.pub)
		if err != nil {
			t.Fatal(err)
		}
		f.lay = other
		if err := os.RemoveAll(f.root); err != nil {
			t.Fatal(err)
		}
		if _, err := f.restore(t); !errors.Is(err, lifecycle.ErrRestoreRefused) {
			t.Fatalf("got %v, want a refusal", err)
		}
	})
	t.Run("the stream is retired", func(t *testing.T) {
		f := newFixture(t, "file", 5)
		if _, err := lifecycle.Retire(context.Background(), f.stream(), lifecycle.Options{}); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(f.root); err != nil {
			t.Fatal(err)
		}
		if _, err := f.restore(t); !errors.Is(err, lifecycle.ErrRestoreRefused) || !errors.Is(err, lifecycle.ErrRetired) {
			t.Fatalf("got %v, want a refusal naming the retirement", err)
		}
	})
	t.Run("the replica holds another log", func(t *testing.T) {
		f := lostMachine(t, false)
		// Another log under the same names ships into the stream's replica.
		dir := filepath.Join(t.TempDir(), stream, stream)
		other, err := logstore.Create(dir, mustSchema(t, schemaV1), f.logConfig(stream, nil))
		if err != nil {
			t.Fatal(err)
		}
		appendRows(t, other, 0, 3, false)
		tg, err := replica.TargetFor(dir, f.dest)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- replica.Run(ctx, []replica.Target{tg}, replica.Options{SyncInterval: 20 * time.Millisecond}, nil)
		}()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			if p, ok, _ := replica.ReadProgress(dir); ok && p.ShippedEnd >= 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the other log was not shipped within a minute")
			}
		}
		cancel()
		<-done
		_ = other.Close()
		_, err = f.restore(t)
		if !errors.Is(err, lifecycle.ErrRestoreRefused) {
			t.Fatalf("got %v, want a refusal", err)
		}
		if _, err := os.Stat(f.lay.StreamDir(stream)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the refused restore left its home behind: %v", err)
		}
	})
}

// TestKilledRestoreFinishesOnRerun kills a real restore process (SIGKILL)
// after each of its steps; the rerun finishes it with the same fence, and
// the log serves as a restore that was never interrupted would.
func TestKilledRestoreFinishesOnRerun(t *testing.T) {
	for _, step := range []string{lifecycle.StepMarker, lifecycle.StepDownloaded, lifecycle.StepPlanned, lifecycle.StepRebuilt, lifecycle.StepOwned, lifecycle.StepRecorded, lifecycle.StepCommitted} {
		t.Run(step, func(t *testing.T) {
			f := lostMachine(t, false)
			killedAt(t, f, "restore", step, "")
			r, err := f.restore(t)
			if step == lifecycle.StepCommitted {
				// The commit landed and the marker went: it is done.
				if !errors.Is(err, lifecycle.ErrRestoreRefused) {
					t.Fatalf("rerun after the commit: %v, want the home-holds-it refusal", err)
				}
				rs := f.loadPublished(t).Restores
				if len(rs) != 1 {
					t.Fatalf("the metadata records restores %+v, want one", rs)
				}
				r = &lifecycle.Restored{From: rs[0].From, Resume: rs[0].Hole.To, Hole: logstore.Span{Start: rs[0].Hole.From, End: rs[0].Hole.To}}
				checkRestored(t, f, r, span(1, 51), 51+lifecycle.FenceTable, logstore.Mark{Publisher: "p", LastSeq: 50, LastOffset: 50})
				return
			}
			if err != nil {
				t.Fatalf("rerun after a kill at %s: %v", step, err)
			}
			if !r.Resumed {
				t.Fatalf("rerun after a kill at %s did not resume: %+v", step, r)
			}
			checkRestored(t, f, r, span(1, 51), 51+lifecycle.FenceTable, logstore.Mark{Publisher: "p", LastSeq: 50, LastOffset: 50})
		})
	}
}

// TestReviveContinuesARetiredStreamAtItsEnd retires a stream and revives
// it on the same root and on a new one: the next log starts at exactly the
// retired end, has the same columns and sort order, keeps the marks, and
// takes rows.
func TestReviveContinuesARetiredStreamAtItsEnd(t *testing.T) {
	for _, where := range []string{"same root", "new root"} {
		t.Run(where, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, "file", 12)
			if _, err := lifecycle.Retire(ctx, f.stream(), lifecycle.Options{}); err != nil {
				t.Fatal(err)
			}
			if where == "new root" {
				if err := os.RemoveAll(f.root); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := f.restore(t); !errors.Is(err, lifecycle.ErrRetired) {
				t.Fatalf("restore without --revive: %v, want the retired refusal", err)
			}
			r, err := lifecycle.Restore(ctx, f.stream(), lifecycle.RestoreOptions{Log: f.logConfig("", nil), Revive: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.From != lifecycle.FromRevive || r.Log != stream+"-v2" || r.Resume != 13 || r.Marks != 1 {
				t.Fatalf("revived %+v, want trades-v2 from 13 with one mark", r)
			}
			md := f.loadPublished(t)
			if md.Retired() || len(md.Logs) != 2 || md.Logs[1].StartOffset != 13 || *md.Logs[0].EndOffset != 13 || md.Logs[0].State != "sealed" {
				t.Fatalf("metadata after the revival: %s", jsonOf(t, md))
			}
			if string(md.Logs[1].Schema) != string(md.Logs[0].Schema) {
				t.Fatalf("the revived log has schema %s, the retired one %s", md.Logs[1].Schema, md.Logs[0].Schema)
			}
			lg, err := logstore.Open(f.lay.LogDir(stream, stream+"-v2"), logstore.Writer)
			if err != nil {
				t.Fatal(err)
			}
			defer lg.Close()
			marks, err := lg.Marks(ctx)
			if err != nil || len(marks) != 1 || marks[0] != (logstore.Mark{Publisher: "p", LastSeq: 12, LastOffset: 12}) {
				t.Fatalf("marks %+v %v, want p at seq 12", marks, err)
			}
			if first, err := lg.Append(ctx, [][]byte{row(99, false)}, 1700000002000000, nil); err != nil || first != 13 {
				t.Fatalf("append to the revived log: offset %d, %v; want 13", first, err)
			}
		})
	}
}

// TestIngestAfterARestoreStartsPastTheHole: a bulk load into a restored
// stream takes the offsets after the fence's hole, the hole stays
// recorded, and the table holds the rows restored and the rows loaded,
// nothing in between.
func TestIngestAfterARestoreStartsPastTheHole(t *testing.T) {
	const n = 300
	f := lostMachine(t, false)
	r, err := f.restore(t)
	if err != nil {
		t.Fatal(err)
	}
	src := writeSource(t, t.TempDir(), source.NDJSON, 0, n)
	res, err := f.ingest([]source.Input{{Path: src, Format: source.NDJSON}}, lifecycle.IngestOptions{})
	if err != nil {
		t.Fatalf("ingest after a restore: %v", err)
	}
	if res.Start != r.Resume || res.End != r.Resume+n {
		t.Fatalf("Ingest = %+v; want offsets [%d,%d), past the hole %v", res, r.Resume, r.Resume+n, r.Hole)
	}
	lg := f.open(t, stream)
	if hs, err := lg.Holes(context.Background()); err != nil || len(hs) != 1 || hs[0] != r.Hole {
		t.Fatalf("holes after the ingest: %v %v; want [%v]", hs, err, r.Hole)
	}
	if got, want := scanOffsets(t, lg), append(span(1, 51), span(r.Resume, r.Resume+n)...); !slices.Equal(got, want) {
		t.Fatalf("the log yields %d offsets (%v … %v), want %d", len(got), got[:3], got[len(got)-3:], len(want))
	}
	pub := f.publishedOffsets(t, stream)
	if !res.Published || len(pub) != 50+n {
		t.Fatalf("published %v: the table holds %d offsets, want %d", res.Published, len(pub), 50+n)
	}
}

// TestRestoredFilesKeepTheirColumnStatistics: the published-file records a
// table-only restore rebuilds carry each column's min, max and null count
// (from the manifests), equal to what the file's rows hold, so sql prunes
// restored files as it pruned the originals.
func TestRestoredFilesKeepTheirColumnStatistics(t *testing.T) {
	f := lostMachine(t, false)
	if _, err := f.restore(t); err != nil {
		t.Fatal(err)
	}
	lg := f.open(t, stream)
	ctx := context.Background()
	recs, err := lg.PublishedFiles(ctx)
	if err != nil || len(recs) == 0 {
		t.Fatalf("read %d published records: %v", len(recs), err)
	}
	for _, r := range recs {
		// What the file's rows hold, read back from the table.
		var minID, maxID int64 = 1 << 62, -1 << 62
		minSym, maxSym := "\xff", ""
		if err := lg.Scan(ctx, r.Start, r.End, nil, func(_, _ int64, row []byte) error {
			var v struct {
				ID  int64  `json:"id"`
				Sym string `json:"sym"`
			}
			if err := json.Unmarshal(row, &v); err != nil {
				return err
			}
			minID, maxID = min(minID, v.ID), max(maxID, v.ID)
			minSym, maxSym = min(minSym, v.Sym), max(maxSym, v.Sym)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want := map[string][2]string{
			"id":  {strconv.FormatInt(minID, 10), strconv.FormatInt(maxID, 10)},
			"sym": {strconv.Quote(minSym), strconv.Quote(maxSym)},
		}
		got, err := logstore.Decode([]byte(r.Stats))
		if err != nil {
			t.Fatal(err)
		}
		for col, w := range want {
			c, ok := got.Column(col)
			if !ok || string(c.Min) != w[0] || string(c.Max) != w[1] || c.Nulls == nil || *c.Nulls != 0 {
				t.Fatalf("the record of [%d,%d) gives %s %+v (ok %v), want bounds %v and 0 nulls; record %s", r.Start, r.End, col, c, ok, w, r.Stats)
			}
		}
	}
	// The log's roll-up (what the metadata's per-log statistics come
	// from) counts the files as covering it: only the fence's hole lies
	// past them.
	sum, err := lg.Summary(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sum.Stats["id"]; !ok {
		t.Fatalf("the restored log's summary has no statistics for id (stats %v); the hole past its files should count as held", sum.Stats)
	}
}
