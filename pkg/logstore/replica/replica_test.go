package replica_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/litestream"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/schema"
)

const doc = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`

// newLog creates a real log under root/s/<name>.
func newLog(t *testing.T, root, name string) *logstore.Log {
	t.Helper()
	return newLogWith(t, root, name, logstore.Config{})
}

func newLogWith(t *testing.T, root, name string, cfg logstore.Config) *logstore.Log {
	t.Helper()
	sch, err := schema.Compile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Stream, cfg.Log = "s", name
	lg, err := logstore.Create(filepath.Join(root, "s", name), sch, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close() })
	return lg
}

// appendRows commits groups of per rows, {"n": offset-1} each.
func appendRows(t *testing.T, lg *logstore.Log, groups, per int) {
	t.Helper()
	for range groups {
		st, err := lg.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rows := make([][]byte, per)
		for i := range rows {
			rows[i] = fmt.Appendf(nil, `{"n":%d}`, st.End-1+int64(i))
		}
		if _, err := lg.Append(context.Background(), rows, time.Now().UnixMicro(), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// replicator is a Run in the background, stopped at cleanup.
type replicator struct {
	cancel context.CancelFunc
	ready  chan struct{}
	done   chan error
}

func start(t *testing.T, targets []replica.Target) *replicator {
	t.Helper()
	return startWith(t, targets, replica.Options{SyncInterval: 20 * time.Millisecond})
}

func startWith(t *testing.T, targets []replica.Target, opts replica.Options) *replicator {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &replicator{cancel: cancel, ready: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		r.done <- replica.Run(ctx, targets, opts, func() { close(r.ready) })
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// waitReady waits until the Run is ready, failing if it ends first.
func (r *replicator) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-r.ready:
	case err := <-r.done:
		close(r.done)
		t.Fatalf("the replicator stopped before it was ready: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the replicator was not ready within a minute")
	}
}

// stop ends the Run and returns its error (once; later calls return nil).
func (r *replicator) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(time.Minute):
		t.Fatal("the replicator did not stop within a minute")
		return nil
	}
}

// waitShipped waits until the log's replicator reports end shipped.
func waitShipped(t *testing.T, dir string, end int64) replica.Progress {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		p, ok, err := replica.ReadProgress(dir)
		if err != nil {
			t.Fatal(err)
		}
		if ok && p.ShippedEnd >= end {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replicator of %s reports %+v after a minute, want offsets below %d shipped", dir, p, end)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// restoreEnd restores client into a new directory and checks that it
// holds offsets 1..end-1, each {"n": offset-1}.
func restoreEnd(t *testing.T, client litestream.ReplicaClient, end int64) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s", "log")
	if err := replica.Restore(ctx, client, dir); err != nil {
		t.Fatal(err)
	}
	back, err := logstore.Open(dir, logstore.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	st, err := back.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.End < end {
		t.Fatalf("the restored log ends at %d; the replicator said every offset below %d was shipped", st.End, end)
	}
	want := int64(1)
	err = back.Scan(ctx, 1, st.End, nil, func(off, _ int64, row []byte) error {
		if off != want || string(row) != fmt.Sprintf(`{"n":%d}`, off-1) {
			return fmt.Errorf("offset %d holds %s, want offset %d", off, row, want)
		}
		want++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestShippedRowsRestore: every offset the replicator reports shipped
// comes back from the replica, across a restart of the replicator.
func TestShippedRowsRestore(t *testing.T) {
	root := t.TempDir()
	lg := newLog(t, root, "log")
	client := replica.FileClient(filepath.Join(t.TempDir(), "replica", "s", "log"))
	targets := []replica.Target{{LogDir: lg.Dir(), Client: client}}

	r := start(t, targets)
	r.waitReady(t)
	appendRows(t, lg, 30, 10)
	waitShipped(t, lg.Dir(), 301)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	appendRows(t, lg, 20, 10) // while no replicator runs
	r = start(t, targets)
	r.waitReady(t)
	appendRows(t, lg, 10, 10)
	waitShipped(t, lg.Dir(), 601)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	restoreEnd(t, client, 601)
}

// TestFreshLogRefusesReplicaOfAnother: a new empty log never ships over a
// replica that holds another log's history (shipping would make every
// later restore of that replica come back empty).
func TestFreshLogRefusesReplicaOfAnother(t *testing.T) {
	root := t.TempDir()
	old := newLog(t, root, "log")
	client := replica.FileClient(filepath.Join(t.TempDir(), "replica", "s", "log"))
	r := start(t, []replica.Target{{LogDir: old.Dir(), Client: client}})
	r.waitReady(t)
	appendRows(t, old, 5, 10)
	waitShipped(t, old.Dir(), 51)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	fresh := newLog(t, t.TempDir(), "log")
	r = start(t, []replica.Target{{LogDir: fresh.Dir(), Client: client}})
	var err error
	select {
	case err = <-r.done:
		close(r.done)
	case <-time.After(time.Minute):
		t.Fatal("the replicator of a fresh log over another's replica neither refused nor stopped within a minute")
	}
	var he *replica.HistoryError
	if !errors.As(err, &he) || he.ReplicaLogID != old.ID() {
		t.Fatalf("replicating a fresh log over another's replica: got %v, want a HistoryError naming log %s", err, old.ID())
	}
	restoreEnd(t, client, 51) // the replica still holds the old history
}

// TestStandbyTakesOver: a second replicator of the same log stands by
// while the first runs, and ships once the first stops.
func TestStandbyTakesOver(t *testing.T) {
	root := t.TempDir()
	lg := newLog(t, root, "log")
	client := replica.FileClient(filepath.Join(t.TempDir(), "replica", "s", "log"))
	targets := []replica.Target{{LogDir: lg.Dir(), Client: client}}
	first := start(t, targets)
	first.waitReady(t)
	var said testkit.SyncBuffer
	second := startWith(t, targets, replica.Options{SyncInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&said, nil))})
	second.waitReady(t)
	if !strings.Contains(said.String(), "standing by") {
		t.Fatalf("a second replicator of a log that is replicating did not stand by; it logged:\n%s", said.String())
	}
	appendRows(t, lg, 5, 10)
	waitShipped(t, lg.Dir(), 51)
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	appendRows(t, lg, 5, 10)
	waitShipped(t, lg.Dir(), 101) // only the second can have shipped these
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
	restoreEnd(t, client, 101)
}

// TestTargets: the replica sits at <destination>/<stream>/<log>/ when a
// destination is named, else at <prefix>/<stream>/_wal/<log>/ beside the
// published tables, for a directory and for S3 (versitygw) alike, and what
// ships restores.
func TestTargets(t *testing.T) {
	srv := testkit.StartS3(t, nil)
	srv.UseCredentials(t)
	// litestream's S3 client cannot load a CA bundle (cmd turns
	// AWS_CA_BUNDLE into SSL_CERT_FILE for it); versitygw here is plain HTTP.
	t.Setenv("AWS_CA_BUNDLE", "")
	s3cfg := warehouse.S3{Endpoint: srv.Endpoint(), Region: testkit.Region, PathStyle: true}
	elsewhere := t.TempDir() // outside every log's root
	cases := []struct {
		name string
		cfg  logstore.Config
		dest replica.Destination
		// where the replica's files must be: a directory, or objects
		// under a key prefix of the bucket
		dir, keys string
	}{
		{name: "published directory", cfg: logstore.Config{Published: filepath.Join(elsewhere, "pub")},
			dir: filepath.Join(elsewhere, "pub", "s", "_wal", "log")},
		{name: "published s3", cfg: logstore.Config{Published: "s3://" + testkit.Bucket + "/tables", S3: s3cfg},
			keys: "tables/s/_wal/log/"},
		{name: "destination directory", dest: replica.Destination{Location: warehouse.Location{Dir: filepath.Join(elsewhere, "replica")}},
			dir: filepath.Join(elsewhere, "replica", "s", "log")},
		{name: "destination s3", dest: replica.Destination{Location: warehouse.Location{S3: "s3://" + testkit.Bucket + "/replica"}, S3: s3cfg},
			keys: "replica/s/log/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lg := newLogWith(t, t.TempDir(), "log", c.cfg)
			target, err := replica.TargetFor(lg.Dir(), c.dest)
			if err != nil {
				t.Fatal(err)
			}
			r := start(t, []replica.Target{target})
			r.waitReady(t)
			appendRows(t, lg, 10, 10)
			waitShipped(t, lg.Dir(), 101)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if c.keys != "" {
				if keys := srv.Keys(t, c.keys); len(keys) == 0 {
					t.Fatalf("nothing was written under %s in the bucket", c.keys)
				}
			} else if _, err := os.Stat(filepath.Join(c.dir, "ltx")); err != nil {
				t.Fatalf("the replica is not at %s: %v", c.dir, err)
			}
			restoreEnd(t, target.Client, 101)
		})
	}
}

// TestTargetInsideTheRootIsRefused: a replica that would sit inside the
// root holding the log (the directory above its stream's home) is refused,
// however the place is spelled: beside the default published tables, as a
// destination, or through a symlink to the root.
func TestTargetInsideTheRootIsRefused(t *testing.T) {
	root := t.TempDir()
	links := t.TempDir()
	if err := os.Symlink(root, filepath.Join(links, "root")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("root", filepath.Join(links, "relative")); err != nil { // a link to a link
		t.Fatal(err)
	}
	lg := newLogWith(t, root, "log", logstore.Config{Published: filepath.Join(root, "published")})
	for name, dest := range map[string]replica.Destination{
		"the default beside the tables": {},
		"a destination in the root":     {Location: warehouse.Location{Dir: filepath.Join(root, "replica")}},
		"the root itself":               {Location: warehouse.Location{Dir: root}},
		"a dotted path into the root":   {Location: warehouse.Location{Dir: filepath.Join(links, "..", filepath.Base(root)) + "/./x/../replica"}},
		"a symlink to the root":         {Location: warehouse.Location{Dir: filepath.Join(links, "root", "replica")}},
		"a relative link to the link":   {Location: warehouse.Location{Dir: filepath.Join(links, "relative", "replica")}},
	} {
		_, err := replica.TargetFor(lg.Dir(), dest)
		var ie *replica.InsideRootError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "--destination") {
			t.Errorf("%s: got %v, want a refusal naming --destination", name, err)
		}
	}
	if _, err := replica.TargetFor(lg.Dir(), replica.Destination{Location: warehouse.Location{Dir: filepath.Join(t.TempDir(), "replica")}}); err != nil {
		t.Errorf("a destination outside the root: %v", err)
	}
}

// TestInsideFollowsALinkToARootNotMadeYet: a config is checked before its
// root exists, so a link to where the root will be is followed even while
// it points at nothing.
func TestInsideFollowsALinkToARootNotMadeYet(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "data")
	if err := os.Symlink(root, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if !replica.Inside(root, filepath.Join(dir, "link", "replica")) {
		t.Error("a replica through a dangling link to the root is not inside it")
	}
	if replica.Inside(root, filepath.Join(dir, "data-replica")) {
		t.Error("a sibling whose name starts with the root's is inside it")
	}
	if !replica.Inside("data", filepath.Join(mustGetwd(t), "data", "replica")) {
		t.Error("a relative root and an absolute replica inside it do not compare")
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// TestANewDestinationGetsTheWholeLog: a log that shipped to one place and
// is then pointed at an empty one (replicate.destination set or changed)
// ships all of itself there, not only what it wrote since, even once
// litestream has dropped its oldest local transaction files (its L0
// retention does so a few minutes after they reach the old replica's L1).
func TestANewDestinationGetsTheWholeLog(t *testing.T) {
	lg := newLog(t, t.TempDir(), "log")
	old := replica.FileClient(filepath.Join(t.TempDir(), "old"))
	r := start(t, []replica.Target{{LogDir: lg.Dir(), Client: old}})
	r.waitReady(t)
	// Two rounds, so litestream holds two local transaction files: the
	// first round's snapshot and what the second shipped.
	appendRows(t, lg, 1, 10)
	waitShipped(t, lg.Dir(), 11)
	appendRows(t, lg, 9, 10)
	waitShipped(t, lg.Dir(), 101)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	l0 := filepath.Join(lg.Dir(), "."+logstore.BufferFile+"-litestream", "ltx", "0")
	files, err := os.ReadDir(l0)
	if err != nil || len(files) < 2 {
		t.Fatalf("litestream's local transaction files: %v, %v", files, err)
	}
	if err := os.Remove(filepath.Join(l0, files[0].Name())); err != nil { // the oldest, as retention removes it
		t.Fatal(err)
	}

	moved := replica.FileClient(filepath.Join(t.TempDir(), "new"))
	var said testkit.SyncBuffer
	r = startWith(t, []replica.Target{{LogDir: lg.Dir(), Client: moved}}, replica.Options{SyncInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&said, nil))})
	r.waitReady(t)
	appendRows(t, lg, 5, 10)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if p, ok, _ := replica.ReadProgress(lg.Dir()); ok && p.ShippedEnd >= 151 {
			break
		}
		if strings.Contains(said.String(), "cannot ship") || time.Now().After(deadline) {
			t.Fatalf("the log did not ship to its new destination:\n%s", said.String())
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	restoreEnd(t, moved, 151)
}
