//go:build linux

package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/wire"
)

// The restore cutover tests run the streamcast command itself: serve with
// replication on under load, stopped with SIGTERM or SIGKILL, restore on
// another (or wiped) root, serve again, and check the clients' own logs of
// what they were acknowledged and shown.

// cutoverPrefix is where a cutover test's tables and replica live: a
// directory, or a prefix on versitygw (credentials in the environment,
// which the children inherit).
type cutoverPrefix struct {
	name string
	pub  string             // the config's published:
	dest string             // the config's replicate.destination: beside pub, outside every root
	loc  warehouse.Location // the same, parsed
	s3   warehouse.S3       // how to reach it (s3:// only)
	yaml string             // the config's s3: section (s3:// only)
}

// cutoverPrefixes are the prefixes each cutover test runs on: a directory
// (under dir) and versitygw.
func cutoverPrefixes() []struct {
	name string
	make func(t *testing.T, dir string) cutoverPrefix
} {
	return []struct {
		name string
		make func(t *testing.T, dir string) cutoverPrefix
	}{
		{"dir", func(t *testing.T, dir string) cutoverPrefix {
			pub := filepath.Join(dir, "pub")
			return cutoverPrefix{name: "dir", pub: pub, dest: filepath.Join(dir, "replica"), loc: warehouse.Location{Dir: pub}}
		}},
		{"s3", func(t *testing.T, dir string) cutoverPrefix {
			srv := startS3(t)
			srv.UseCredentials(t)
			pub := "s3://" + testBucket + "/cutover"
			return cutoverPrefix{
				name: "s3", pub: pub, dest: "s3://" + testBucket + "/cutover-replica", loc: warehouse.Location{S3: pub},
				s3:   warehouse.S3{Endpoint: srv.Endpoint(), Region: testRegion, PathStyle: true},
				yaml: fmt.Sprintf("s3:\n  endpoint: %s\n  region: %s\n  path_style: true\n", srv.Endpoint(), testRegion),
			}
		}},
	}
}

// cutoverConfig writes a config with root and the shared published prefix:
// one exactly-once stream, replicated every 20 ms, sealed, flushed and
// published often so the table holds part of the rows.
func cutoverConfig(t *testing.T, dir, root string, pre cutoverPrefix) string {
	t.Helper()
	path := filepath.Join(dir, "streamcast.yaml")
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
root: %s
published: %s
%smaintain:
  seal_every: 100ms
  publish_every: 300ms
  compact_every: 0
  clean_every: 0
  clean_published_every: 0
  retain_every: 0
  flush_every: 300ms
replicate:
  destination: %s
  sync_interval: 20ms
streams:
  - name: trades
    replicate: true
    exactly_once: true
    schema: {"type": "object", "properties": {"id": {"type": "integer"}, "sym": {"type": "string"}}, "required": ["id", "sym"]}
`, root, pre.pub, pre.yaml, pre.dest)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// serveProc is `streamcast serve` in a child process of its own.
type serveProc struct {
	cmd    *exec.Cmd
	base   string // ws://host:port
	stderr bytes.Buffer
	done   chan struct{}
}

func startServe(t *testing.T, exe, cfg string) *serveProc {
	t.Helper()
	addr := filepath.Join(t.TempDir(), "addr")
	p := &serveProc{done: make(chan struct{})}
	p.cmd = exec.Command(exe, "serve", "--config", cfg, "--addr-file", addr)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.signal(syscall.SIGKILL); <-p.done })
	waitFor(t, "serve to listen", 60*time.Second, func() bool {
		select {
		case <-p.done:
			t.Fatalf("serve exited: %s", p.stderr.String())
		default:
		}
		b, err := os.ReadFile(addr)
		if err != nil || len(b) == 0 {
			return false
		}
		p.base = "ws://" + string(bytes.TrimSpace(b))
		return true
	})
	return p
}

func (p *serveProc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

func (p *serveProc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	p.signal(sig)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit within a minute of %v: %s", sig, p.stderr.String())
	}
}

// replicatedThrough reads the stream's replicated_through from /stats.
func (p *serveProc) replicatedThrough() (int64, bool) {
	var st struct {
		Streams []struct {
			Name              string `json:"name"`
			ReplicatedThrough *int64 `json:"replicated_through"`
		} `json:"streams"`
	}
	resp, err := http.Get("http" + p.base[len("ws"):] + "/stats")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, false
	}
	for _, s := range st.Streams {
		if s.Name == "trades" && s.ReplicatedThrough != nil {
			return *s.ReplicatedThrough, true
		}
	}
	return 0, false
}

// cutoverLoad is the clients: a plain publisher, an exactly-once loader
// and a subscriber, each keeping its own log of what it was told.
type cutoverLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	acked map[int64]string // offset → row, both publishers' acknowledgements
	eo    map[int64]int64  // loader seq → offset acknowledged
	seen  map[int64]string // offset → row the subscriber was shown
	last  int64            // the subscriber's last offset
	err   error            // the first client error, for a stalled test's report
}

func (l *cutoverLoad) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

func cutoverRow(sym string, id int64) string {
	return `{"id":` + strconv.FormatInt(id, 10) + `,"sym":"` + sym + `"}`
}

// startLoad runs the clients against base until stop; from is the
// subscriber's first offset.
func startLoad(base string, l *cutoverLoad, from int64) {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	url := base + "/trades"
	l.wg.Add(3)
	go func() {
		defer l.wg.Done()
		p, err := wire.Publish(ctx, url, wire.PublishOptions{})
		if err != nil {
			l.fail(err)
			return
		}
		defer p.Close()
		for i := int64(1); ctx.Err() == nil; i++ {
			row := cutoverRow("p", i)
			off, err := p.Send(ctx, []byte(row))
			if err != nil {
				return
			}
			l.mu.Lock()
			l.acked[off] = row
			l.mu.Unlock()
		}
	}()
	go func() {
		defer l.wg.Done()
		p, err := wire.Publish(ctx, url, wire.PublishOptions{Publisher: "loader-1"})
		if err != nil {
			l.fail(err)
			return
		}
		defer p.Close()
		// The client numbers rows from the greeting's mark + 1: a loader
		// that reconnects resends exactly what the stream lacks.
		for seq := p.Greeting().Publisher.LastSeq + 1; ctx.Err() == nil; seq++ {
			row := cutoverRow("e", seq)
			off, err := p.Send(ctx, []byte(row))
			if err != nil {
				return
			}
			l.mu.Lock()
			l.acked[off], l.eo[seq] = row, off
			l.mu.Unlock()
		}
	}()
	go func() {
		defer l.wg.Done()
		s, err := wire.Subscribe(ctx, url, wire.SubscribeOptions{Offset: wire.At(from)})
		if err != nil {
			l.fail(err)
			return
		}
		defer s.Close()
		for {
			m, err := s.Recv(ctx)
			if err != nil {
				return
			}
			l.mu.Lock()
			l.seen[m.Offset], l.last = string(m.Row), m.Offset
			l.mu.Unlock()
		}
	}()
}

func (l *cutoverLoad) stop() { l.cancel(); l.wg.Wait() }

func (l *cutoverLoad) maxAcked() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var m int64
	for off := range l.acked {
		m = max(m, off)
	}
	return m
}

func (l *cutoverLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// readAll subscribes from offset 1 and returns every row up to the
// greeting's end, by offset, failing on an offset shown twice.
func readAll(t *testing.T, base string) map[int64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := wire.Subscribe(ctx, base+"/trades", wire.SubscribeOptions{FromEarliest: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := s.Greeting()
	if g.Replay == nil {
		return nil
	}
	out := map[int64]string{}
	for {
		m, err := s.Recv(ctx)
		if err != nil {
			t.Fatalf("read the stream back (up to %d): %v", g.Replay.End, err)
		}
		if _, dup := out[m.Offset]; dup {
			t.Fatalf("offset %d shown twice", m.Offset)
		}
		out[m.Offset] = string(m.Row)
		if m.Offset >= g.Replay.End-1 {
			return out
		}
	}
}

// tableState is the published table's current snapshot and the data files
// it reads (sorted); 0 and none before the first publish.
type tableState struct {
	snapshot int64
	files    []string
	parents  map[int64]int64 // every snapshot the metadata holds → its parent
}

func readTable(t *testing.T, pre cutoverPrefix) tableState {
	t.Helper()
	ctx := context.Background()
	pt, err := warehouse.NewTable(pre.loc, "trades", "trades", pre.s3)
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	tbl, err := pt.Load(ctx)
	if errors.Is(err, warehouse.ErrNoTable) {
		return tableState{}
	}
	if err != nil {
		t.Fatal(err)
	}
	st := tableState{parents: map[int64]int64{}}
	for _, sn := range tbl.Metadata().Snapshots() {
		if sn.ParentSnapshotID != nil {
			st.parents[sn.SnapshotID] = *sn.ParentSnapshotID
		}
	}
	if cur := tbl.CurrentSnapshot(); cur != nil {
		st.snapshot = cur.SnapshotID
	}
	files, err := pt.CurrentFiles(ctx, tbl)
	if err != nil {
		t.Fatal(err)
	}
	for f := range files {
		st.files = append(st.files, f)
	}
	sort.Strings(st.files)
	return st
}

// descends reports whether snapshot id is from, or a descendant of it.
func (st tableState) descends(id, from int64) bool {
	for seen := 0; seen <= len(st.parents); seen++ {
		if id == from {
			return true
		}
		p, ok := st.parents[id]
		if !ok {
			return false
		}
		id = p
	}
	return false
}

// restoreCmd runs `streamcast restore` and returns what it printed on stdout.
func restoreCmd(t *testing.T, exe, cfg string) lifecycle.Restored {
	t.Helper()
	cmd := exec.Command(exe, "restore", "--config", cfg, "trades")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("streamcast restore: %v\n%s", err, stderr.String())
	}
	var r struct {
		From   string  `json:"from"`
		Resume int64   `json:"resume"`
		Hole   []int64 `json:"hole"`
		R      int64   `json:"replica_end"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("restore printed %q: %v", out, err)
	}
	t.Logf("restore: %s", bytes.TrimSpace(stderr.Bytes()))
	return lifecycle.Restored{From: r.From, Resume: r.Resume, ReplicaEnd: r.R}
}

// loadUntil runs the load on p until at least n rows are acknowledged.
func loadUntil(t *testing.T, p *serveProc, l *cutoverLoad, n int) {
	t.Helper()
	startLoad(p.base, l, 1)
	// The loaders wait for each ack (an fsync each): about a thousand
	// rows a second on a loaded 2-core box, so the cap is generous.
	waitFor(t, fmt.Sprintf("%d acknowledged rows", n), 3*time.Minute, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil {
			t.Fatalf("a client failed: %v", l.err)
		}
		return len(l.acked) >= n
	})
}

func newLoad() *cutoverLoad {
	return &cutoverLoad{acked: map[int64]string{}, eo: map[int64]int64{}, seen: map[int64]string{}}
}

// resumeAfter serves the restored root, resumes the clients (the
// subscriber from its last offset + 1, across the hole) until they are
// acknowledged a few more rows, and checks that the loader's rows are
// each in the stream exactly once and new rows start at resume.
func resumeAfter(t *testing.T, exe, cfg string, l *cutoverLoad, resume int64) {
	t.Helper()
	p := startServe(t, exe, cfg)
	before := l.count()
	// The loader's highest seq acknowledged before the restore: after an
	// unplanned loss the rows above what the replica shipped are gone, and
	// the loader must have resent them all before the check below can hold.
	var topSeq int64
	l.mu.Lock()
	for seq := range l.eo {
		topSeq = max(topSeq, seq)
	}
	l.mu.Unlock()
	startLoad(p.base, l, l.last+1)
	waitFor(t, "the clients to resume", time.Minute, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil {
			t.Fatalf("a client failed after the restore: %v", l.err)
		}
		var resent int64 // the loader's highest seq acknowledged past the fence
		for seq, off := range l.eo {
			if off >= resume {
				resent = max(resent, seq)
			}
		}
		return len(l.acked) >= before+200 && l.last >= resume && resent >= topSeq
	})
	l.stop()
	got := readAll(t, p.base)
	l.mu.Lock()
	defer l.mu.Unlock()
	for off, row := range l.seen {
		if off > resume && got[off] != row {
			t.Fatalf("offset %d: the subscriber was shown %s after the restore, the stream holds %q", off, row, got[off])
		}
	}
	bySeq := map[int64]int64{}
	for off, row := range got {
		var r struct {
			ID  int64  `json:"id"`
			Sym string `json:"sym"`
		}
		if err := json.Unmarshal([]byte(row), &r); err != nil {
			t.Fatal(err)
		}
		if r.Sym != "e" {
			continue
		}
		if prev, dup := bySeq[r.ID]; dup {
			t.Fatalf("loader-1's seq %d is in the stream twice, at %d and %d", r.ID, prev, off)
		}
		bySeq[r.ID] = off
	}
	var top int64
	for seq := range l.eo {
		top = max(top, seq)
	}
	for seq := int64(1); seq <= top; seq++ {
		if _, ok := bySeq[seq]; !ok {
			t.Fatalf("loader-1's seq %d (of %d) is missing from the stream", seq, top)
		}
	}
	p.stop(t, syscall.SIGTERM)
}

// TestPlannedCutoverUnderLoadLosesNothing: serve under load with
// replication on, SIGTERM, restore on another root, serve there; on a
// directory prefix and on versitygw. Every acknowledged row is back at its
// offset, the table is unchanged (the restored log starts from the same
// snapshot and data files, and publishes on top of them), and the
// publishers and the subscriber resume across the hole. Only under
// STREAMCAST_SOAK=full, as CI runs it.
func TestPlannedCutoverUnderLoadLosesNothing(t *testing.T) {
	exe := streamcastExe(t)
	for _, pc := range cutoverPrefixes() {
		t.Run(pc.name, func(t *testing.T) {
			if !testkit.SoakFull() {
				// About 15 s on either prefix, to keep the README's test run
				// under its 3 minutes; CI runs both every time. The README's
				// run keeps the unplanned loss below, the harder case.
				t.Skip("the planned cutover runs under " + testkit.SoakEnv + "=full")
			}
			dir := t.TempDir()
			pre := pc.make(t, dir)
			oldCfg := cutoverConfig(t, t.TempDir(), filepath.Join(dir, "old"), pre)
			newCfg := cutoverConfig(t, t.TempDir(), filepath.Join(dir, "new"), pre)

			l := newLoad()
			p := startServe(t, exe, oldCfg)
			loadUntil(t, p, l, testkit.SoakCount(2000, 6000))
			waitFor(t, "a publish pass under load", time.Minute, func() bool { return readTable(t, pre).snapshot != 0 })
			p.stop(t, syscall.SIGTERM) // under load
			l.stop()
			before := readTable(t, pre)

			r := restoreCmd(t, exe, newCfg)
			if r.From != lifecycle.FromReplica {
				t.Fatalf("restored from %q, want the replica", r.From)
			}
			top := l.maxAcked()
			if r.ReplicaEnd != top+1 {
				t.Fatalf("the replica ends at %d, but offsets up to %d were acknowledged: a planned stop ships everything", r.ReplicaEnd, top)
			}
			after := readTable(t, pre)
			if after.snapshot != before.snapshot || !slices.Equal(after.files, before.files) {
				t.Fatalf("the restore changed the table: snapshot %d with %d files before, %d with %d files after",
					before.snapshot, len(before.files), after.snapshot, len(after.files))
			}

			p2 := startServe(t, exe, newCfg)
			got := readAll(t, p2.base)
			for off, row := range l.acked {
				if got[off] != row {
					t.Fatalf("offset %d was acknowledged as %s, the restored stream holds %q", off, row, got[off])
				}
			}
			for off, row := range l.seen {
				if got[off] != row {
					t.Fatalf("offset %d was shown to the subscriber as %s, the restored stream holds %q", off, row, got[off])
				}
			}
			p2.stop(t, syscall.SIGTERM)
			resumeAfter(t, exe, newCfg, l, r.Resume)

			// The restored log published on top of the table it found:
			// compaction is off, so every file stays and the current
			// snapshot descends from the one before the stop.
			now := readTable(t, pre)
			if !now.descends(now.snapshot, before.snapshot) {
				t.Fatalf("the restored log's table (snapshot %d) does not descend from the snapshot before the stop (%d)", now.snapshot, before.snapshot)
			}
			for _, f := range before.files {
				if !slices.Contains(now.files, f) {
					t.Fatalf("the table no longer reads %s after the restored log published", f)
				}
			}
			if now.snapshot == before.snapshot {
				t.Fatal("the restored log published nothing after resuming")
			}
		})
	}
}

// TestUnplannedLossMidLoadFencesEveryAcknowledgedOffset: SIGKILL serve
// under load with replication on, wipe its root, restore. Every row the
// replica had shipped (as /stats last showed it) is back at its offset, no
// offset at or below the highest one acknowledged is issued again, and the
// exactly-once loader resumes with no duplicate and no gap. On a directory
// prefix and on versitygw, only under STREAMCAST_SOAK=full, as CI runs it.
func TestUnplannedLossMidLoadFencesEveryAcknowledgedOffset(t *testing.T) {
	exe := streamcastExe(t)
	for _, pc := range cutoverPrefixes() {
		t.Run(pc.name, func(t *testing.T) {
			if !testkit.SoakFull() {
				// About 17 s on a directory and 20 s on versitygw, to keep
				// the README's test run within its budget; CI runs both
				// every time, and testscript/restore_unplanned.txtar
				// runs the same loss without load in the README's run.
				t.Skip("the unplanned loss under load runs under " + testkit.SoakEnv + "=full")
			}
			dir := t.TempDir()
			unplannedLoss(t, exe, dir, pc.make(t, dir))
		})
	}
}

func unplannedLoss(t *testing.T, exe, dir string, pre cutoverPrefix) {
	root := filepath.Join(dir, "root")
	cfg := cutoverConfig(t, t.TempDir(), root, pre)

	l := newLoad()
	p := startServe(t, exe, cfg)
	loadUntil(t, p, l, testkit.SoakCount(2000, 6000))
	var shipped int64
	waitFor(t, "the replica to ship past offset 1000", time.Minute, func() bool {
		shipped, _ = p.replicatedThrough()
		return shipped > 1000
	})
	p.stop(t, syscall.SIGKILL) // mid-load
	l.stop()
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}

	r := restoreCmd(t, exe, cfg)
	top := l.maxAcked()
	if r.From != lifecycle.FromReplica || r.ReplicaEnd <= shipped {
		t.Fatalf("restored %+v, want from the replica, past offset %d that /stats showed shipped", r, shipped)
	}
	if r.Resume <= top {
		t.Fatalf("the restored log resumes at %d, but the lost writer acknowledged offsets up to %d", r.Resume, top)
	}

	p2 := startServe(t, exe, cfg)
	got := readAll(t, p2.base)
	for off, row := range l.acked {
		if off <= shipped && got[off] != row {
			t.Fatalf("offset %d was acknowledged as %s and shipped, the restored stream holds %q", off, row, got[off])
		}
	}
	p2.stop(t, syscall.SIGTERM)
	resumeAfter(t, exe, cfg, l, r.Resume)
	// No offset the lost writer acknowledged was issued again: every
	// acknowledgement after the restore is past the fence.
	l.mu.Lock()
	defer l.mu.Unlock()
	for off, row := range l.acked {
		if off > top && off < r.Resume {
			t.Fatalf("offset %d (%s) was acknowledged inside the hole [%d,%d)", off, row, top+1, r.Resume)
		}
	}
}
