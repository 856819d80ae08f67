//go:build linux

package lifecycle_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/wire"
)

func (f *fixture) retire(t *testing.T) (*lifecycle.Retirement, error) {
	t.Helper()
	return lifecycle.Retire(context.Background(), f.stream(), lifecycle.Options{})
}

// checkRetired checks a stream of 12 rows retired: the log fenced at 13
// and published whole, the metadata recording the retirement and the
// log's state, with no intent, the published copy as current as the
// home's.
func checkRetired(t *testing.T, f *fixture) *meta.Metadata {
	t.Helper()
	const end = 13
	lg := f.open(t, stream)
	st, err := lg.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Fenced || st.End != end || st.PublishedThrough != end-1 {
		t.Errorf("the retired log: fenced %v, end %d, published through %d; want fenced at %d and published whole", st.Fenced, st.End, st.PublishedThrough, end)
	}
	dense(t, "the retired log's published table", f.publishedOffsets(t, stream), 1, end)
	md := f.load(t)
	if pub := f.loadPublished(t); pub.Version != md.Version {
		t.Errorf("the published copy is version %d, the home's %d", pub.Version, md.Version)
	}
	cur := md.Current()
	if md.Retirement == nil || md.Retirement.EndOffset != end || md.Retirement.At <= 0 || md.Intent != nil ||
		cur.State != meta.Retired || cur.EndOffset == nil || *cur.EndOffset != end || len(md.Logs) != 1 {
		t.Fatalf("metadata version %d after retire: %s", md.Version, jsonOf(t, md))
	}
	return md
}

// TestRetiredStreamIsServedReadOnly: after retire, serve refuses a
// publisher with 4410 carrying when and where the stream ended, and still
// replays every row; a second retire is a no-op.
func TestRetiredStreamIsServedReadOnly(t *testing.T) {
	f := newFixture(t, "default", 12)
	r, err := f.retire(t)
	if err != nil {
		t.Fatal(err)
	}
	if r.EndOffset != 13 || r.Log != stream || r.Already || r.Resumed || r.Version != 3 || time.Since(time.UnixMicro(r.At)) > time.Minute {
		t.Errorf("Retire = %+v; want the end 13 at about now, version 3", r)
	}
	md := checkRetired(t, f)

	base := brokertest.Start(t, f.serveConfig(schemaV1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = wire.Publish(ctx, base+"/"+stream, wire.PublishOptions{})
	var re *wire.StreamRetired
	if !errors.As(err, &re) || re.At != md.Retirement.At || re.EndOffset != 13 {
		t.Fatalf("publish to a retired stream: %v; want 4410 with at %d and end_offset 13", err, md.Retirement.At)
	}
	s, err := wire.Subscribe(ctx, base+"/"+stream, wire.SubscribeOptions{Offset: wire.At(1)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for off := int64(1); off <= 12; off++ {
		msg, err := s.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Offset != off || string(msg.Row) != string(row(int(off-1), false)) {
			t.Fatalf("replayed %d %s; want %d %s", msg.Offset, msg.Row, off, row(int(off-1), false))
		}
	}

	again, err := lifecycle.Retire(context.Background(), f.stream(), lifecycle.Options{})
	if err != nil || !again.Already || again.EndOffset != 13 || again.At != md.Retirement.At {
		t.Errorf("a second retire: %+v, %v; want a no-op naming the same retirement", again, err)
	}
}

// TestKilledRetireFinishesOnRerun kills a real retire process after each
// of its steps; the next run finishes it with the same retirement.
func TestKilledRetireFinishesOnRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	for _, step := range []string{lifecycle.StepIntent, lifecycle.StepSealed, lifecycle.StepPublished, lifecycle.StepFenced, lifecycle.StepCommitted} {
		t.Run(step, func(t *testing.T) {
			f := newFixture(t, "default", 12)
			killedAt(t, f, "retire", step, "")
			var at int64
			if md := f.load(t); md.Intent != nil {
				if err := md.Intent.Decode(&struct {
					At *int64 `json:"at"`
				}{&at}); err != nil {
					t.Fatal(err)
				}
			}
			r, err := f.retire(t)
			if err != nil {
				t.Fatalf("the rerun after a kill at %s: %v", step, err)
			}
			want := step != lifecycle.StepCommitted
			if r.Resumed != want || r.Already == want || r.EndOffset != 13 || (want && r.At != at) {
				t.Errorf("the rerun: %+v; want resumed %v with the intent's at %d, end 13", r, want, at)
			}
			checkRetired(t, f)
		})
	}
}

// TestMigrateRefusesARetiredStreamWhoseMetadataWasLost is the case of
// reference/003: a retired stream's home loses its metadata while its
// log and the published copy survive; migrate, with the same schema or a
// new one, adopts the copy, sees the retirement and refuses: no -v2 log,
// the published metadata unchanged, the log still fenced.
func TestMigrateRefusesARetiredStreamWhoseMetadataWasLost(t *testing.T) {
	for _, kind := range []string{"file", "s3"} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind, 12)
			if _, err := f.retire(t); err != nil {
				t.Fatal(err)
			}
			before := f.loadPublished(t)
			beforeJSON := jsonOf(t, before)
			for _, p := range []string{f.lay.MetadataDir(stream), f.lay.MetadataFile(stream)} {
				if err := os.RemoveAll(p); err != nil {
					t.Fatal(err)
				}
			}
			for _, sch := range []string{schemaV1, schemaV2} {
				_, err := f.migrate(t, sch)
				if !errors.Is(err, lifecycle.ErrRetired) {
					t.Fatalf("migrate of a retired stream whose metadata was lost: %v; want ErrRetired", err)
				}
				for _, name := range []string{"trades-v2", "trades-v3"} {
					if _, err := os.Stat(f.lay.LogDir(stream, name)); !os.IsNotExist(err) {
						t.Errorf("the refused migrate made %s: %v", name, err)
					}
				}
				if after := jsonOf(t, f.loadPublished(t)); after != beforeJSON {
					t.Errorf("the published metadata changed:\nbefore %s\nafter  %s", beforeJSON, after)
				}
			}
			if md := f.load(t); !md.Retired() || md.Version != before.Version {
				t.Errorf("the home after the refusal: version %d, retired %v; want the adopted version %d, retired", md.Version, md.Retired(), before.Version)
			}
			if st, _ := f.open(t, stream).Status(context.Background()); !st.Fenced {
				t.Error("the retired log is no longer fenced")
			}
			entries, _ := os.ReadDir(filepath.Join(f.root, stream))
			if len(entries) != 3 { // the log, the metadata directory, its plain copy
				t.Errorf("the home holds %d entries after the refusal, want 3", len(entries))
			}
		})
	}
}
