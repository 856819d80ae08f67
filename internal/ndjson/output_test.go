package ndjson

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/wire"
)

// outputRun is one run of a tail with --cursor and --output, driven by
// hand: what Tail's writer does for each batch is write, then advance.
type outputRun struct {
	t      *testing.T
	cursor *Cursor
	out    *Output
	log    *logRecorder
}

func openOutputRun(t *testing.T, cursorPath, outputPath string) *outputRun {
	t.Helper()
	c, warn, err := OpenCursor(cursorPath)
	if err != nil || warn != nil {
		t.Fatalf("OpenCursor: warn %v, err %v", warn, err)
	}
	log := &logRecorder{}
	o, err := OpenOutput(outputPath, c, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.f.Close() })
	return &outputRun{t: t, cursor: c, out: o, log: log}
}

// write writes the lines of offsets from to to (inclusive) and advances
// the cursor past them, without saving it.
func (r *outputRun) write(from, to int64) {
	r.t.Helper()
	var b []byte
	for o := from; o <= to; o++ {
		b = fmt.Appendf(b, "[%d,0,{}]\n", o)
	}
	if _, err := r.out.Write(b); err != nil {
		r.t.Fatal(err)
	}
	r.cursor.Advance(to)
}

func (r *outputRun) save() {
	r.t.Helper()
	if err := r.cursor.Save(true); err != nil {
		r.t.Fatal(err)
	}
}

func fileText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func linesOf(from, to int64) string {
	var b strings.Builder
	for o := from; o <= to; o++ {
		fmt.Fprintf(&b, "[%d,0,{}]\n", o)
	}
	return b.String()
}

func TestOpenOutputCutsTheLinesWrittenAfterTheLastSave(t *testing.T) {
	dir := t.TempDir()
	cursor, output := filepath.Join(dir, "c"), filepath.Join(dir, "out.ndjson")
	first := openOutputRun(t, cursor, output)
	first.write(1, 3)
	first.save()
	first.write(4, 5) // killed before the next save

	second := openOutputRun(t, cursor, output)
	if got, want := fileText(t, output), linesOf(1, 3); got != want {
		t.Fatalf("the output holds %q after the rerun opened it; want %q", got, want)
	}
	if second.cursor.Resume() != 4 {
		t.Fatalf("the rerun resumes at %d; want 4", second.cursor.Resume())
	}
	cut := fmt.Sprintf("cut the last %d bytes (2 rows) of %s: they were written after the position saved in %s, and the rows are sent again from offset 4", len(linesOf(4, 5)), output, cursor)
	if got := second.log.text(); got != cut {
		t.Errorf("the rerun said %q; want once %q", got, cut)
	}
	second.write(4, 6)
	second.save()
	if got, want := fileText(t, output), linesOf(1, 6); got != want {
		t.Errorf("after the rerun the output holds %q; want %q", got, want)
	}
}

func TestOpenOutputCountsALineAKillCutShortAsARow(t *testing.T) {
	dir := t.TempDir()
	cursor, output := filepath.Join(dir, "c"), filepath.Join(dir, "out.ndjson")
	first := openOutputRun(t, cursor, output)
	first.write(1, 2)
	first.save()
	first.out.Write([]byte("[3,0,{}]\n[4,0,"))

	second := openOutputRun(t, cursor, output)
	if got, want := fileText(t, output), linesOf(1, 2); got != want {
		t.Fatalf("the output holds %q; want %q", got, want)
	}
	if got := second.log.text(); !strings.Contains(got, "cut the last 14 bytes (2 rows)") {
		t.Errorf("the rerun said %q; want the 14 bytes and 2 rows it cut", got)
	}
}

func TestOpenOutputBeforeTheFirstSaveCutsEverythingTheRunWrote(t *testing.T) {
	dir := t.TempDir()
	cursor, output := filepath.Join(dir, "c"), filepath.Join(dir, "out.ndjson")
	first := openOutputRun(t, cursor, output)
	if got := readCursorFile(t, cursor); !strings.HasPrefix(got, "none\n{") {
		t.Fatalf("a new cursor bound to an output holds %q; want no offset and the output's mark", got)
	}
	first.write(1, 3) // killed before its first save

	second := openOutputRun(t, cursor, output)
	if got := fileText(t, output); got != "" {
		t.Fatalf("the output holds %q; want it empty, as the cursor recorded", got)
	}
	if second.cursor.Resume() != wire.Null {
		t.Errorf("the rerun resumes at %d; want no saved position", second.cursor.Resume())
	}
}

func TestOpenOutputAppendsToAFileShorterThanRecordedWithoutCutting(t *testing.T) {
	dir := t.TempDir()
	cursor, output := filepath.Join(dir, "c"), filepath.Join(dir, "out.ndjson")
	first := openOutputRun(t, cursor, output)
	first.write(1, 3)
	first.save()
	if err := os.Truncate(output, 5); err != nil { // someone else cut it
		t.Fatal(err)
	}

	second := openOutputRun(t, cursor, output)
	if got, want := fileText(t, output), linesOf(1, 3)[:5]; got != want {
		t.Fatalf("the output holds %q; want it untouched, %q", got, want)
	}
	want := fmt.Sprintf("%s holds 5 bytes, fewer than the %d cursor %s recorded: it was cut or rewritten by something else, so nothing is cut; appending from offset 4", output, len(linesOf(1, 3)), cursor)
	if got := second.log.text(); got != want {
		t.Errorf("the rerun said %q; want once %q", got, want)
	}
}

func TestOpenOutputAppendsToAFileRewrittenInPlaceWithoutCutting(t *testing.T) {
	dir := t.TempDir()
	cursor, output := filepath.Join(dir, "c"), filepath.Join(dir, "out.ndjson")
	first := openOutputRun(t, cursor, output)
	first.write(1, 3)
	first.save()
	// Rewritten through the same inode (> out.ndjson, cp over it): longer
	// than recorded, but not what the cursor recorded.
	theirs := strings.Repeat("a line the cursor never recorded\n", 10)
	if err := os.WriteFile(output, []byte(theirs), 0o644); err != nil {
		t.Fatal(err)
	}
	second := openOutputRun(t, cursor, output)
	if got := fileText(t, output); got != theirs {
		t.Fatalf("the rewritten file holds %q; want it untouched", got)
	}
	want := fmt.Sprintf("%s does not end as cursor %s recorded at byte %d: it was rewritten by something else, so nothing is cut; appending from offset 4", output, cursor, len(linesOf(1, 3)))
	if got := second.log.text(); got != want {
		t.Errorf("the rerun said %q; want once %q", got, want)
	}
}

func TestOpenOutputAppendsToARotatedFileWithoutCutting(t *testing.T) {
	dir := t.TempDir()
	cursor, output := filepath.Join(dir, "c"), filepath.Join(dir, "out.ndjson")
	first := openOutputRun(t, cursor, output)
	first.write(1, 3)
	first.save()
	first.write(4, 4)
	// Rotated: the old file moves away and a new one, longer than the
	// recorded length, takes its path. Neither may be cut.
	if err := os.Rename(output, output+".1"); err != nil {
		t.Fatal(err)
	}
	theirs := strings.Repeat("a line the cursor never recorded\n", 10)
	if err := os.WriteFile(output, []byte(theirs), 0o644); err != nil {
		t.Fatal(err)
	}

	second := openOutputRun(t, cursor, output)
	if got := fileText(t, output); got != theirs {
		t.Fatalf("the new file holds %q; want it untouched", got)
	}
	if got, want := fileText(t, output+".1"), linesOf(1, 4); got != want {
		t.Fatalf("the rotated file holds %q; want it untouched, %q", got, want)
	}
	want := fmt.Sprintf("%s is another file than the one cursor %s recorded at that path (it was rotated or replaced), so nothing is cut; appending from offset 4", output, cursor)
	if got := second.log.text(); got != want {
		t.Errorf("the rerun said %q; want once %q", got, want)
	}
	// From here on the new file is the recorded one.
	second.write(4, 5)
	second.save()
	second.out.Write([]byte("[6,0,{}]\n"))
	third := openOutputRun(t, cursor, output)
	if got, want := fileText(t, output), theirs+linesOf(4, 5); got != want {
		t.Errorf("the new file holds %q; want %q", got, want)
	}
	if !strings.Contains(third.log.text(), "cut the last 9 bytes (1 row)") {
		t.Errorf("the third run said %q; want the row it cut", third.log.text())
	}
}

func TestOpenOutputWithACursorOfTheOldFormatCutsNothingAndRecordsTheFile(t *testing.T) {
	dir := t.TempDir()
	cursor, output := filepath.Join(dir, "c"), filepath.Join(dir, "out.ndjson")
	if err := os.WriteFile(cursor, []byte("3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(output, []byte(linesOf(1, 4)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := openOutputRun(t, cursor, output)
	if got, want := fileText(t, output), linesOf(1, 4); got != want {
		t.Fatalf("the output holds %q; want it untouched", got)
	}
	want := fmt.Sprintf("cursor %s records no length of %s (it was saved without --output), so nothing is cut; appending from offset 4: rows written after its last save may appear twice, this once", cursor, output)
	if got := r.log.text(); got != want {
		t.Errorf("OpenOutput said %q; want %q", got, want)
	}
	last, mark, ok := parseCursor([]byte(readCursorFile(t, cursor)))
	if !ok || last != 3 || mark == nil || mark.Bytes != int64(len(linesOf(1, 4))) {
		t.Errorf("the cursor now holds %d with mark %+v; want 3 and the output's length now", last, mark)
	}
}

func TestCursorMoveWithAnOutputAppendsTheRowsAgainAndKeepsTheMark(t *testing.T) {
	dir := t.TempDir()
	cursor, output := filepath.Join(dir, "c"), filepath.Join(dir, "out.ndjson")
	r := openOutputRun(t, cursor, output)
	r.write(1, 3)
	r.save()
	for _, last := range []int64{1, wire.Null} {
		if err := r.cursor.Move(last); err != nil {
			t.Fatal(err)
		}
		got, mark, ok := parseCursor([]byte(readCursorFile(t, cursor)))
		if !ok || got != last || mark == nil || mark.Bytes != int64(len(linesOf(1, 3))) {
			t.Errorf("Move(%d): the cursor holds %d with mark %+v; want %d and the whole file's length", last, got, mark, last)
		}
	}
	if got, want := fileText(t, output), linesOf(1, 3); got != want {
		t.Errorf("Move rewrote the output: %q; want %q", got, want)
	}
}

func TestOpenOutputRefusesAMemoryCursorAndTheCursorFileItself(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenOutput(filepath.Join(dir, "out"), MemoryCursor("s3://b/k"), nil); err == nil || !strings.Contains(err.Error(), "--output needs a local --cursor FILE") {
		t.Errorf("a cursor in a bucket alone: %v; want a refusal naming the local file it needs", err)
	}
	path := filepath.Join(dir, "c")
	c, _, _ := OpenCursor(path)
	if _, err := OpenOutput(path, c, nil); err == nil || !strings.Contains(err.Error(), "is the --cursor file") {
		t.Errorf("the cursor file as the output: %v; want a refusal", err)
	}
}

func TestParseCursorReadsAnOffsetAloneAndAnOffsetWithAMark(t *testing.T) {
	for _, tc := range []struct {
		text string
		last int64
		mark *outputMark
		ok   bool
	}{
		{"41", 41, nil, true},
		{"41\n", 41, nil, true},
		{"0\n", 0, nil, true},
		{"41\n{\"output\":\"/d/o\",\"bytes\":7,\"dev\":1,\"ino\":2}\n", 41, &outputMark{Path: "/d/o", Bytes: 7, Dev: 1, Ino: 2}, true},
		{"none\n{\"output\":\"/d/o\",\"bytes\":0}", wire.Null, &outputMark{Path: "/d/o"}, true},
		{"41\n{\"output\":\"/d/o\",\"bytes\":7,\"later\":true}", 41, &outputMark{Path: "/d/o", Bytes: 7}, true},
		{"41\n{\"output\":\"/d/o\",\"bytes\":7,\"sum\":\"e3069283\"}", 41, &outputMark{Path: "/d/o", Bytes: 7, Sum: "e3069283"}, true},
		{"none", wire.Null, nil, false},
		{"41\n42", wire.Null, nil, false},
		{"41\n{\"bytes\":7}", wire.Null, nil, false},
		{"41\n{\"output\":\"/d/o\",\"bytes\":-1}", wire.Null, nil, false},
		{"-1\n{\"output\":\"/d/o\",\"bytes\":1}", wire.Null, nil, false},
		{"41\n{", wire.Null, nil, false},
	} {
		last, mark, ok := parseCursor([]byte(tc.text))
		if ok != tc.ok || last != tc.last || fmt.Sprint(mark) != fmt.Sprint(tc.mark) {
			t.Errorf("parseCursor(%q) = %d, %+v, %v; want %d, %+v, %v", tc.text, last, mark, ok, tc.last, tc.mark, tc.ok)
		}
	}
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"41", "41\n", "none\n{\"output\":\"/o\",\"bytes\":0}", "7\n{\"output\":\"/a b\\n\",\"bytes\":3,\"dev\":1,\"ino\":9}", "x", "1\n{"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		last, mark, ok := parseCursor(text)
		if !ok {
			return
		}
		// What parses is written back the same way: a save of what was
		// read reads as the same position and mark.
		again, mark2, ok2 := parseCursor(cursorText(last, mark))
		if !ok2 || again != last || fmt.Sprint(mark) != fmt.Sprint(mark2) {
			t.Fatalf("%q read as %d %+v, written as %q, read back as %d %+v %v", text, last, mark, cursorText(last, mark), again, mark2, ok2)
		}
		if bytes.Count(cursorText(last, mark), []byte("\n")) > 1 {
			t.Fatalf("%q is written on more than two lines", text)
		}
	})
}

func TestTailIntoAnOutputRecordsItsLengthWithTheLastOffset(t *testing.T) {
	url := replayServer(t, 51, nil)
	dir := t.TempDir()
	cursor, output := filepath.Join(dir, "c"), filepath.Join(dir, "out.ndjson")
	c, _, _ := OpenCursor(cursor)
	o, err := OpenOutput(output, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if _, err := Tail(ctxT(t), url+"/trades", o, tailDefaults(TailOptions{Offset: wire.At(1), Cursor: c})); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(output)
	if err != nil {
		t.Fatal(err)
	}
	last, mark, ok := parseCursor([]byte(readCursorFile(t, cursor)))
	if !ok || last != 50 || mark == nil || mark.Bytes != info.Size() {
		t.Errorf("the cursor holds %d with mark %+v; want 50 and the output's %d bytes", last, mark, info.Size())
	}
}

func TestTailIntoAnOutputSavesALiveStartBeforeAnyRow(t *testing.T) {
	// A run that starts live and is killed after writing rows it had not
	// saved must not start live again on the rerun: it would skip the
	// rows OpenOutput cuts.
	url := replayServer(t, 51, nil)
	dir := t.TempDir()
	cursor, output := filepath.Join(dir, "c"), filepath.Join(dir, "out.ndjson")
	c, _, _ := OpenCursor(cursor)
	o, err := OpenOutput(output, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if _, err := Tail(ctxT(t), url+"/trades", o, tailDefaults(TailOptions{Cursor: c})); err != nil {
		t.Fatal(err)
	}
	if last, _, ok := parseCursor([]byte(readCursorFile(t, cursor))); !ok || last != 50 {
		t.Errorf("after a live start at 51 the cursor holds %d; want 50", last)
	}
}
