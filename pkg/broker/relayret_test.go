//go:build linux

package broker

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// relayCacheMaxBytes bounds the relay's local files in
// TestRelayLogIsACacheTrimmedByItsTiers: a few of its small files, far
// less than all of them.
const relayCacheMaxBytes = 24 << 10

// TestRelayLogIsACacheTrimmedByItsTiers: a durable relay with real
// maintenance children and small tiers mirrors N rows. Its seal and clean
// children keep its log as a cache: the local files shrink to
// tiers.staging_max_bytes, the buffer to what no file holds yet, and a
// subscriber below what it still holds is refused with 4416 and the
// earliest offset, while a replay of what it holds (from its Parquet
// files) is byte-identical to the origin's frames. Nothing is ever written
// under the published prefix, and serve no longer warns that the relay's
// log has no retention.
func TestRelayLogIsACacheTrimmedByItsTiers(t *testing.T) {
	exe := streamcastExe(t)
	origin := startNode(t, originConfig(t))
	up := wsURL(origin, "/trades")
	const rows = 3000
	publishRows(t, up, 0, rows)
	ref := collect(t, up+"?offset=0")
	ref.waitLen(t, "the origin's subscriber", rows)
	want := ref.snapshot() // want[i] is offset i+1

	cfg := relayConfig(t, up, true)
	pub := filepath.Join(t.TempDir(), "pub")
	cfg.Published = "file://" + pub
	cfg.Maintain = config.Default().Maintain
	cfg.Maintain.SealEvery = 50 * time.Millisecond
	cfg.Maintain.PublishEvery = 50 * time.Millisecond
	cfg.Maintain.CleanEvery = 50 * time.Millisecond
	cfg.Maintain.CleanPublishedEvery = 50 * time.Millisecond
	cfg.Maintain.RetainEvery = 50 * time.Millisecond
	cfg.Maintain.CompactEvery = time.Hour
	cfg.Maintain.FlushEvery = 0 // seal cuts full targets only: the tail stays buffered
	cfg.Tiers = config.Tiers{
		TargetSealBytes:  16 << 10,
		StagingRetention: time.Hour, // the size bound trims, deterministically
		StagingMaxBytes:  relayCacheMaxBytes,
		LocalDeleteGrace: 2 * time.Second, // a replay that listed a file reads it
	}
	// A cache is never published: no table under the configured prefix,
	// nothing under the default one. Registered before the server, so it
	// runs after the server's stop, however the test ends. (The stream's
	// metadata copy, trades.metadata*, is still written under the prefix
	// when the log is created: meta.Store commits through it.)
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(pub, "trades", "trades")); !os.IsNotExist(err) {
			t.Errorf("the relay published a table under %s (%v); a relay's log is a cache and is never published", pub, err)
		}
		if _, err := os.Stat(filepath.Join(cfg.Root, meta.PublishedDir)); !os.IsNotExist(err) {
			t.Errorf("the relay wrote under the default published prefix (%v)", err)
		}
	})
	logs := &testkit.SyncBuffer{}
	relay := startServer(struct{ testing.TB }{t}, cfg, Options{Executable: exe, Logger: log.New(logs)})
	waitFor(t, "the relay mirroring every row", 60*time.Second, func() bool {
		r := streamStats(relay, "trades").Relay
		return r != nil && r.RowsMirrored == rows
	})

	// The cache is trimmed: offset 1 is refused, with the earliest offset
	// the relay still serves, once clean has raised the floor.
	earliestRE := regexp.MustCompile(`"earliest":(\d+)`)
	var earliest int64
	waitFor(t, "the relay to refuse offset 1 as evicted", 60*time.Second, func() bool {
		_, _, err := dial(t, wsURL(relay, "/trades?offset=1"))
		code, reason := closeOf(err)
		if code != 4416 {
			return false
		}
		m := earliestRE.FindStringSubmatch(reason)
		if !strings.Contains(reason, `"why":"evicted"`) || m == nil {
			t.Fatalf("offset 1 refused with %d %q; want 4416 evicted with the earliest offset", code, reason)
		}
		earliest, _ = strconv.ParseInt(m[1], 10, 64)
		return true
	})
	if earliest <= 1 || earliest > rows {
		t.Fatalf("the relay serves from offset %d; want a trimmed cache holding some of the %d rows", earliest, rows)
	}

	// Local files within the bound once the delete queue drains, and some
	// kept: the replay below reads Parquet, not only the buffer.
	files := func() (n int, total int64) {
		paths, err := filepath.Glob(filepath.Join(cfg.Root, "trades", "*", logstore.FilesDir, "*.parquet"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if fi, err := os.Stat(p); err == nil {
				n++
				total += fi.Size()
			}
		}
		return n, total
	}
	waitFor(t, "the relay's local files within staging_max_bytes", 60*time.Second, func() bool {
		_, total := files()
		return total <= relayCacheMaxBytes
	})
	st := streamStats(relay, "trades")
	if n, total := files(); n == 0 || st.LocalFiles == nil || *st.LocalFiles == 0 {
		t.Fatalf("the relay keeps no local file (%d on disk, %d bytes; /stats %v); want the newest within %d bytes", n, total, st.LocalFiles, relayCacheMaxBytes)
	}
	if st.BufferedRows == nil || *st.BufferedRows >= rows-earliest+1 {
		t.Errorf("the relay's buffer holds %v rows; want fewer than the %d it serves (files hold the rest)", st.BufferedRows, rows-earliest+1)
	}

	// What it holds replays byte-identical to the origin's frames, from
	// its earliest offset (offset=0: every row it still serves). Seal may
	// still be cutting the buffer into files, and clean trimming them, so
	// the replay starts wherever the floor is now: at or above the one seen.
	c := collect(t, wsURL(relay, "/trades?offset=0"))
	firstRE := regexp.MustCompile(`^\[(\d+),`)
	waitFor(t, "the replay's first frame", 30*time.Second, func() bool { return c.len() > 0 })
	m := firstRE.FindSubmatch(c.snapshot()[0])
	if m == nil {
		t.Fatalf("the replay's first frame %.100s has no offset", c.snapshot()[0])
	}
	from, _ := strconv.ParseInt(string(m[1]), 10, 64)
	if from < earliest || from > rows {
		t.Fatalf("the replay starts at offset %d; the relay refused offset 1 with earliest %d, and holds %d rows", from, earliest, rows)
	}
	c.waitLen(t, "a replay of the relay's cache", int(rows-from+1))
	sameFrames(t, "the replay of the relay's cache", c.snapshot(), want[from-1:])

	if st.PublishedThrough != nil || st.PublishLagRows != nil {
		t.Errorf("/stats reports publishing (published_through %v, lag %v), but a relay publishes nothing", st.PublishedThrough, st.PublishLagRows)
	}
	if out := logs.String(); strings.Contains(out, "tiers: retention does not apply") {
		t.Errorf("serve still warns that a relay's log has no retention:\n%s", out)
	}
}
