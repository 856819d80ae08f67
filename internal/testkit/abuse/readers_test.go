package abuse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// TestReplacedPublishedFileIsRefusedByEveryReader publishes a table of
// several files through a real server's maintenance children, stops it,
// and copies one published file over another: both are valid files of the
// same table, so only their offsets give them away. sql and snapshot, run
// as the commands a user runs, must fail naming the replaced file, as
// serve's replay does, rather than answer with the other file's rows.
func TestReplacedPublishedFileIsRefusedByEveryReader(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	dir := t.TempDir()
	root := filepath.Join(dir, "data")
	pub := filepath.Join(dir, "published")
	tab := publishedTable(t, root, pub, 2)
	cfg := cliConfig(t, root, pub)
	want := fmt.Sprint(tab.Through)
	if out, errs, code := run(t, "sql", "--config", cfg, "--format", "csv", "t", "SELECT count(*) FROM log"); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("sql over the intact table: exit %d, %q (want a count of %s): %s", code, out, want, errs)
	}

	a, b := tab.Files[0], tab.Files[1]
	copyOver(t, osPath(b.Path), osPath(a.Path))
	t.Logf("copied %s (offsets [%d,%d)) over %s (offsets [%d,%d))", filepath.Base(b.Path), b.Start, b.End, filepath.Base(a.Path), a.Start, a.End)

	for _, c := range []struct {
		what string
		args []string
	}{
		{"sql count", []string{"sql", "--config", cfg, "--format", "csv", "t", "SELECT count(*), count(DISTINCT streamcast_offset) FROM log"}},
		{"sql of the replaced range", []string{"sql", "--config", cfg, "--format", "csv", "t", fmt.Sprintf("SELECT count(*) FROM log WHERE streamcast_offset < %d", a.End)}},
		{"snapshot", []string{"snapshot", "--config", cfg, "t"}},
		{"snapshot of the replaced range", []string{"snapshot", "--config", cfg, "--format", "frames", "--end-offset", fmt.Sprint(a.End), "t"}},
	} {
		out, errs, code := run(t, c.args...)
		if code == 0 {
			t.Errorf("%s answered with exit 0 over a table whose file %s holds other offsets than recorded; stdout %d bytes: %.200s; stderr: %s",
				c.what, filepath.Base(a.Path), len(out), out, errs)
			continue
		}
		if !strings.Contains(errs, filepath.Base(a.Path)) || !strings.Contains(errs, "replaced") {
			t.Errorf("%s failed (exit %d) without naming the replaced file %s: %s", c.what, code, filepath.Base(a.Path), errs)
		}
		t.Logf("%s: exit %d: %s", c.what, code, strings.TrimSpace(errs))
	}
}

// TestRestoreRefusesATableMissingADataFile loses a machine (its root) and
// then one data file of its published table: restore must refuse, naming
// the file and what to do, rather than report success and leave serve to
// fail its replay from offset 1; and sql must call the file missing, not
// "deleted under this read", which sends the user to read again.
func TestRestoreRefusesATableMissingADataFile(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	dir := t.TempDir()
	root := filepath.Join(dir, "data")
	pub := filepath.Join(dir, "published")
	tab := publishedTable(t, root, pub, 2)
	gone := tab.Files[len(tab.Files)/2]
	if err := os.Remove(osPath(gone.Path)); err != nil {
		t.Fatal(err)
	}
	t.Logf("removed %s (offsets [%d,%d))", filepath.Base(gone.Path), gone.Start, gone.End)

	_, errs, code := run(t, "sql", "--config", cliConfig(t, root, pub), "t", "SELECT count(*) FROM log")
	if code == 0 || !strings.Contains(errs, filepath.Base(gone.Path)) || !strings.Contains(errs, "missing") || strings.Contains(errs, "deleted under this read") {
		t.Errorf("sql with %s gone: exit %d, %s; want a failure calling it missing", filepath.Base(gone.Path), code, errs)
	}

	// The machine is lost: a fresh root, the same published prefix.
	fresh := filepath.Join(dir, "fresh")
	out, errs, code := run(t, "restore", "--config", cliConfig(t, fresh, pub), "t")
	if code == 0 {
		t.Fatalf("restore reported success with %s missing from the table: %s%s", filepath.Base(gone.Path), out, errs)
	}
	for _, want := range []string{filepath.Base(gone.Path), "missing", "put each file back", "run restore again"} {
		if !strings.Contains(errs, want) {
			t.Errorf("restore's refusal does not say %q: %s", want, errs)
		}
	}
	t.Logf("restore: exit %d: %s", code, strings.TrimSpace(errs))
}

// TestCommitFailureDetailNamesNoServerPath fills the disk under a real
// server so that its commits fail, and checks the commit_failed details
// publishers get: they name the cause, and no path of the server's. A
// publisher has no business knowing where the server keeps its files.
// Mounting a small tmpfs needs root; the test is skipped, saying so, for
// anyone else.
func TestCommitFailureDetailNamesNoServerPath(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	mnt := smallDisk(t, "4m")
	s := start(t, options{root: filepath.Join(mnt, "data")})
	l := startLoad(t, s, 1, 20)
	waitUntil(t, 60*time.Second, func() (bool, string) {
		return l.failures() > 0, fmt.Sprintf("%d rows acknowledged, no commit failed yet", l.count())
	})
	l.stop()
	for _, e := range l.errors() {
		if strings.Contains(e, mnt) || strings.Contains(e, "/data/") {
			t.Errorf("a publisher was told a path of the server's: %q", e)
		}
	}
	if !strings.Contains(s.logs.String(), mnt) {
		t.Errorf("the server's log does not keep the path of the log that failed to commit")
	}
	t.Logf("details: %q", l.errors())
}

// publishedTable runs a server with its maintenance children on root
// (publishing under pub), publishes rows until the table holds at least
// files data files and every row acknowledged, stops the server, and
// returns the table as its manifests record it.
func publishedTable(t *testing.T, root, pub string, files int) logstore.Table {
	t.Helper()
	// Small files, so that compaction leaves several in the table.
	extra := "published: " + pub + "\ntiers:\n  target_seal_bytes: 65536\n  target_file_bytes: 32768\n"
	s := start(t, options{maintain: true, root: root, extra: extra})
	loc, err := warehouse.Parse(pub, "")
	if err != nil {
		t.Fatal(err)
	}
	pt, err := warehouse.NewTable(loc, "t", "t", warehouse.S3{})
	if err != nil {
		t.Fatal(err)
	}
	l := startLoad(t, s, 1, 50)
	var tab logstore.Table
	read := func() (bool, string) {
		tab, err = logstore.ReadTable(context.Background(), pt)
		if err != nil {
			return false, err.Error()
		}
		return len(tab.Files) >= files && tab.Through >= int64(l.count()),
			fmt.Sprintf("the table holds %d files through offset %d; %d rows acknowledged", len(tab.Files), tab.Through, l.count())
	}
	waitUntil(t, 60*time.Second, func() (bool, string) {
		return l.count() >= 3000, fmt.Sprintf("%d rows acknowledged", l.count())
	})
	l.stop()
	waitUntil(t, 60*time.Second, read)
	// Stopped, nothing swaps a file of the table under the test.
	s.stop()
	if ok, why := read(); !ok {
		t.Fatalf("after the server stopped: %s", why)
	}
	t.Logf("the table holds %d files through offset %d", len(tab.Files), tab.Through)
	return tab
}

// cliConfig writes the config the CLI commands run with: the server's
// root and published prefix, and the stream.
func cliConfig(t *testing.T, root, pub string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "streamcast.yaml")
	cfg := fmt.Sprintf("root: %s\npublished: %s\nstreams:\n  - name: t\n    durable: true\n    max_replay: null\n", root, pub)
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs the streamcast command with args (at most a minute) and
// returns its stdout, its stderr and its exit code.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errs bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("streamcast %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errs.String(), code
}

// copyOver replaces dst's bytes with src's, as a careless copy or an
// attacker with write access to the prefix would.
func copyOver(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// osPath is a local table's file location as a path.
func osPath(loc string) string { return strings.TrimPrefix(loc, "file://") }
