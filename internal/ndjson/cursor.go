package ndjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// DefaultSaveEvery is how often a Cursor writes its file at most, unless a
// save is forced (a clean exit).
const DefaultSaveEvery = time.Second

// Cursor is a consumer's position kept in a file: the decimal text of the
// last offset it finished with, so the next run resumes one above it. A
// Cursor bound to an Output (`tail --output`) adds a second line, the
// output's mark: a JSON object naming the file and its length when that
// offset was reached, so a rerun can cut what was appended after the save
// (see OpenOutput). The first line is "none" when such a cursor has no
// offset yet. A file of one offset, as every cursor held before outputs
// were kept, still reads: it is a position without a mark.
//
// A Cursor only moves forward on its own (Advance ignores offsets at or below
// the highest it has seen); only Move, the explicit reset, rewinds it. Saves are atomic: a temporary file beside the target is
// written, synced and renamed over it, so a crash leaves either the old or
// the new position, never a torn one. Safe for concurrent use.
type Cursor struct {
	path  string
	mem   bool // no file: the position lives in memory (and in a RemoteCursor's object)
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex // guards the fields below and serializes file writes
	loaded  int64      // the value read at open; wire.Null when the file was absent
	highest int64      // the furthest offset finished with; wire.Null when none
	saved   int64      // the value the file holds (as far as this process knows)
	lastAt  time.Time  // when the file was last written

	mark    *outputMark // the output mark read at open; nil when the file had none
	out     *Output     // the file the lines go to, once bound; nil for stdout
	outSize int64       // out's length when highest was reached: what a save records
}

// outputMark is the second line of a cursor bound to an Output: which file
// the lines went to and how long it was when the offset on the first line
// was reached. Dev and Ino (0 where the platform has none) tell the same
// file from one put in its place; Sum, the CRC-32C of the (up to)
// sumWindow bytes before Bytes, tells it from the same file rewritten in
// place by something else ("" when not recorded).
type outputMark struct {
	Path  string `json:"output"`
	Bytes int64  `json:"bytes"`
	Dev   uint64 `json:"dev,omitempty"`
	Ino   uint64 `json:"ino,omitempty"`
	Sum   string `json:"sum,omitempty"`
}

// noOffset is the first line of a cursor that keeps an output's mark but
// no offset yet.
const noOffset = "none"

// parseCursor reads a cursor file's text: the offset on the first line
// (wire.Null for "none") and, on an optional second line, an output mark.
// ok is false for text that is neither.
func parseCursor(text []byte) (last int64, mark *outputMark, ok bool) {
	first, rest, _ := bytes.Cut(bytes.TrimSpace(text), []byte("\n"))
	first, rest = bytes.TrimSpace(first), bytes.TrimSpace(rest)
	if len(rest) > 0 {
		mark = new(outputMark)
		if rest[0] != '{' || json.Unmarshal(rest, mark) != nil || mark.Path == "" || mark.Bytes < 0 {
			return wire.Null, nil, false
		}
	}
	if string(first) == noOffset && mark != nil {
		return wire.Null, mark, true
	}
	n, err := strconv.ParseInt(string(first), 10, 64)
	if err != nil || n < 0 {
		return wire.Null, nil, false
	}
	return n, mark, true
}

// cursorText is what a cursor file holds for last (wire.Null: none) and
// mark (nil: none), without the final newline.
func cursorText(last int64, mark *outputMark) []byte {
	if mark == nil {
		return strconv.AppendInt(nil, last, 10)
	}
	var b []byte
	if last == wire.Null {
		b = append(b, noOffset...)
	} else {
		b = strconv.AppendInt(b, last, 10)
	}
	m, _ := json.Marshal(mark) // strings and integers: cannot fail
	return append(append(b, '\n'), m...)
}

// OpenCursor reads the cursor file at path. A missing file is an absent
// cursor (Last returns Null). A file that cannot be read, is empty, or does
// not hold one non-negative integer is also treated as absent: warn is then
// non-nil and says why, for the caller to show; err is reserved for a path
// that cannot be used at all (a directory).
func OpenCursor(path string) (c *Cursor, warn error, err error) {
	c = &Cursor{path: path, every: DefaultSaveEvery, now: time.Now, loaded: wire.Null, highest: wire.Null, saved: wire.Null}
	info, statErr := os.Stat(path)
	if statErr == nil && info.IsDir() {
		return nil, nil, fmt.Errorf("cursor %s is a directory; give a file path", path)
	}
	data, readErr := os.ReadFile(path)
	switch {
	case errors.Is(readErr, fs.ErrNotExist):
		return c, nil, nil
	case readErr != nil:
		return c, fmt.Errorf("cursor %s cannot be read (%v); starting as if it were absent", path, unwrapPath(readErr)), nil
	}
	text := bytes.TrimSpace(data)
	if len(text) == 0 {
		return c, fmt.Errorf("cursor %s is empty; starting as if it were absent", path), nil
	}
	n, mark, ok := parseCursor(text)
	if !ok {
		return c, fmt.Errorf("cursor %s holds %.30q, not an offset; starting as if it were absent", path, text), nil
	}
	c.loaded, c.highest, c.saved, c.mark = n, n, n, mark
	return c, nil, nil
}

// MemoryCursor returns an absent cursor kept in memory only, named name in
// messages: the local side of a cursor that lives in an S3 object alone
// (see RemoteCursor). Save never writes a file.
func MemoryCursor(name string) *Cursor {
	return &Cursor{path: name, mem: true, every: DefaultSaveEvery, now: time.Now, loaded: wire.Null, highest: wire.Null, saved: wire.Null}
}

// unwrapPath drops the *fs.PathError wrapper (its path is already in the
// message).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Path returns the cursor's file.
func (c *Cursor) Path() string { return c.path }

// Loaded returns the offset the file held when it was opened, or Null.
func (c *Cursor) Loaded() int64 { return c.loaded }

// Last returns the furthest offset finished with (loaded or advanced), or Null.
func (c *Cursor) Last() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.highest
}

// Resume returns where a consumer resumes: Last()+1, or Null when the cursor
// is absent.
func (c *Cursor) Resume() int64 {
	last := c.Last()
	if last == wire.Null {
		return wire.Null
	}
	return last + 1
}

// Advance records that every row up to offset has been finished with. It
// never moves the cursor backwards: an offset at or below the highest seen is
// ignored (and reported false).
func (c *Cursor) Advance(offset int64) bool {
	if offset < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.highest != wire.Null && offset <= c.highest {
		return false
	}
	c.highest = offset
	if c.out != nil {
		// Advance follows the Write that carried offset's line, on the
		// same goroutine: the length now ends exactly after that line.
		c.outSize = c.out.size.Load()
	}
	return true
}

// Move sets the cursor's position to last, backwards or forwards, and
// writes the file at once: the explicit move of a saved position
// (`tail --reset-position`), the one way a Cursor goes backwards. A last
// below 0 (a tail that starts at the stream's first offset) saves no
// offset at all: the file is removed, so the cursor is absent.
func (c *Cursor) Move(last int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if last < 0 {
		last = wire.Null
	}
	switch {
	case c.mem:
	case c.out != nil:
		// The output is not rewritten: the rows from the new start are
		// appended again, after everything it holds now.
		c.outSize = c.out.size.Load()
		if err := c.writeLocked(last); err != nil {
			return fmt.Errorf("move cursor %s to offset %d: %w", c.path, last, err)
		}
	case last == wire.Null:
		if err := os.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("move cursor %s: %w", c.path, err)
		}
	default:
		if err := writeFileAtomic(c.path, cursorText(last, nil)); err != nil {
			return fmt.Errorf("move cursor %s to offset %d: %w", c.path, last, err)
		}
	}
	c.highest, c.saved, c.lastAt = last, last, c.now()
	return nil
}

// Save writes the cursor's position to its file if it changed and a second
// (DefaultSaveEvery) has passed since the last write, or at once when force
// is set. Nothing is written before the cursor has a position.
func (c *Cursor) Save(force bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mem || c.highest == wire.Null || c.highest == c.saved {
		return nil
	}
	now := c.now()
	if !force && !c.lastAt.IsZero() && now.Sub(c.lastAt) < c.every {
		return nil
	}
	if err := c.writeLocked(c.highest); err != nil {
		return fmt.Errorf("save cursor %s at offset %d: %w", c.path, c.highest, err)
	}
	c.saved, c.lastAt = c.highest, now
	return nil
}

// writeLocked writes last, with the output's mark when one is bound. The
// output is synced first: the mark must never count bytes a crash of the
// machine could still take back, or a rerun would append after a hole.
// c.mu is held.
func (c *Cursor) writeLocked(last int64) error {
	if c.out == nil {
		return writeFileAtomic(c.path, cursorText(last, nil))
	}
	if err := c.out.f.Sync(); err != nil {
		return fmt.Errorf("sync output %s: %w", c.out.path, err)
	}
	m, err := c.out.mark(c.outSize)
	if err != nil {
		return err
	}
	return writeFileAtomic(c.path, cursorText(last, m))
}

// bound reports whether an Output is bound to the cursor.
func (c *Cursor) bound() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out != nil
}

// bind makes o the file whose mark the cursor keeps, and writes the
// cursor at once with o's length now, so that from here on whatever o
// gets beyond the last save is known to be unsaved. o's length must match
// the cursor's position (OpenOutput cut it so).
func (c *Cursor) bind(o *Output) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out, c.outSize = o, o.size.Load()
	if err := c.writeLocked(c.highest); err != nil {
		return fmt.Errorf("save cursor %s with output %s: %w", c.path, o.path, err)
	}
	c.saved = c.highest
	return nil
}

// writeFileAtomic replaces path with data (plus a newline): it writes a
// temporary file in the same directory, syncs it, renames it over path and
// syncs the directory, so readers and a crash see the old or the new
// content, never a mix.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	name := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(name)
		}
	}()
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(name, path); err != nil {
		return err
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename's durability; not all filesystems support it
		d.Close()
	}
	return nil
}
