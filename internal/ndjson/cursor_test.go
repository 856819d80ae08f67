package ndjson

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

func readCursorFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestOpenCursorTreatsAMissingFileAsAbsentWithoutAWarning(t *testing.T) {
	c, warn, err := OpenCursor(filepath.Join(t.TempDir(), "c"))
	if err != nil || warn != nil {
		t.Fatalf("OpenCursor: warn %v, err %v", warn, err)
	}
	if c.Last() != wire.Null || c.Resume() != wire.Null || c.Loaded() != wire.Null {
		t.Errorf("absent cursor: last %d resume %d loaded %d", c.Last(), c.Resume(), c.Loaded())
	}
}

func TestOpenCursorTreatsAnEmptyOrGarbledFileAsAbsentWithAWarning(t *testing.T) {
	for _, content := range []string{"", "  \n", "abc", "-3", "12 13", "1e3"} {
		path := filepath.Join(t.TempDir(), "c")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		c, warn, err := OpenCursor(path)
		if err != nil {
			t.Fatalf("%q: err %v", content, err)
		}
		if warn == nil || !strings.Contains(warn.Error(), "as if it were absent") {
			t.Errorf("%q: warning %v, want one saying it is treated as absent", content, warn)
		}
		if c.Last() != wire.Null {
			t.Errorf("%q: last %d, want wire.Null", content, c.Last())
		}
	}
}

func TestOpenCursorTreatsAnUnreadableFileAsAbsentWithAWarning(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	path := filepath.Join(t.TempDir(), "c")
	if err := os.WriteFile(path, []byte("5"), 0o000); err != nil {
		t.Fatal(err)
	}
	c, warn, err := OpenCursor(path)
	if err != nil || warn == nil || c.Last() != wire.Null {
		t.Errorf("unreadable: last %d, warn %v, err %v", c.Last(), warn, err)
	}
}

func TestOpenCursorRefusesADirectory(t *testing.T) {
	if _, _, err := OpenCursor(t.TempDir()); err == nil {
		t.Error("a directory was accepted as a cursor file")
	}
}

func TestCursorResumesOneAboveTheLoadedOffset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c")
	if err := os.WriteFile(path, []byte("41\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, warn, err := OpenCursor(path)
	if err != nil || warn != nil {
		t.Fatal(warn, err)
	}
	if c.Loaded() != 41 || c.Last() != 41 || c.Resume() != 42 {
		t.Errorf("loaded %d last %d resume %d, want 41 41 42", c.Loaded(), c.Last(), c.Resume())
	}
}

func TestCursorNeverMovesBackwardsOnItsOwn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c")
	if err := os.WriteFile(path, []byte("10"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _, _ := OpenCursor(path)
	for _, o := range []int64{3, 10, 7} {
		if c.Advance(o) {
			t.Errorf("Advance(%d) moved a cursor at 10", o)
		}
	}
	if err := c.Save(true); err != nil {
		t.Fatal(err)
	}
	if got := readCursorFile(t, path); got != "10" {
		t.Errorf("file holds %s after re-reading older rows, want 10", got)
	}
	if !c.Advance(11) || c.Last() != 11 {
		t.Errorf("Advance(11) did not move the cursor (last %d)", c.Last())
	}
}

func TestCursorMoveRewritesTheFileAtOnceEvenBackwards(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c")
	os.WriteFile(path, []byte("10\n"), 0o644)
	c, _, _ := OpenCursor(path)
	if err := c.Move(3); err != nil {
		t.Fatal(err)
	}
	if got := readCursorFile(t, path); got != "3" || c.Resume() != 4 {
		t.Fatalf("after Move(3): file %s, Resume %d; want 3 and 4", got, c.Resume())
	}
	if !c.Advance(4) {
		t.Fatal("Advance(4) after Move(3) was ignored")
	}
	if err := c.Move(-1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) || c.Last() != wire.Null {
		t.Fatalf("after Move(-1): stat %v, Last %d; want no file and Null", err, c.Last())
	}
}

func TestCursorSavesAtMostOnceASecondUnlessForced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c")
	c, _, _ := OpenCursor(path)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }

	c.Advance(1)
	if err := c.Save(false); err != nil {
		t.Fatal(err)
	}
	if got := readCursorFile(t, path); got != "1" {
		t.Fatalf("first save wrote %s, want 1", got)
	}
	c.Advance(2)
	now = now.Add(500 * time.Millisecond)
	if err := c.Save(false); err != nil {
		t.Fatal(err)
	}
	if got := readCursorFile(t, path); got != "1" {
		t.Errorf("a save 0.5 s after the last wrote %s; want it throttled (1)", got)
	}
	now = now.Add(600 * time.Millisecond)
	if err := c.Save(false); err != nil {
		t.Fatal(err)
	}
	if got := readCursorFile(t, path); got != "2" {
		t.Errorf("a save 1.1 s after the last wrote %s, want 2", got)
	}
	c.Advance(3)
	if err := c.Save(true); err != nil {
		t.Fatal(err)
	}
	if got := readCursorFile(t, path); got != "3" {
		t.Errorf("a forced save wrote %s, want 3", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries after saves, want only the cursor (no temporary files)", len(entries))
	}
}

func TestCursorWithoutAPositionWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c")
	c, _, _ := OpenCursor(path)
	if err := c.Save(true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a cursor with no position created its file (stat: %v)", err)
	}
}

func TestCursorSaveNamesTheFileWhenItCannotWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "c")
	c, _, _ := OpenCursor(path)
	c.Advance(5)
	err := c.Save(true)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "offset 5") {
		t.Errorf("Save into a missing directory: %v; want an error naming the file and offset", err)
	}
}
