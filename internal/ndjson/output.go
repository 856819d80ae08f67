package ndjson

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/streamcast/streamcast/pkg/wire"
)

// Output is the file `tail --output` appends its lines to, kept with a
// local Cursor so that the pair holds every row exactly once across
// crashes. Each cursor save syncs the file first and records, with the
// offset and in the same atomic write, the file's length and identity at
// that offset (the cursor's mark). A run killed after writing lines it
// had not saved yet leaves them past the recorded length; the next
// OpenOutput cuts them off, and the tail sends those rows again.
//
// It never cuts a file the cursor did not record: one that is shorter
// than recorded, another file at the path (rotated or replaced), or one
// whose bytes before the recorded length changed (rewritten in place) is
// appended to as it is, with a notice.
type Output struct {
	f        *os.File
	path     string // as given, for messages
	abs      string // recorded in the mark
	dev, ino uint64 // 0 where the platform has no file ids
	size     atomic.Int64
}

// OpenOutput opens (or creates) the file at path for appending, brings it
// in line with what c recorded, says once through log what it changed or
// could not check, and binds it to c: c is written at once with the
// file's length now. The returned Output is Tail's writer; Close it after
// Tail returns.
func OpenOutput(path string, c *Cursor, log Logger) (*Output, error) {
	if c == nil || c.mem {
		return nil, errors.New("--output needs a local --cursor FILE: the cursor file records how much of the output its saved offset covers, in the same atomic write")
	}
	if log == nil {
		log = nopLogger{}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", path, err)
	}
	if cabs, err := filepath.Abs(c.path); err == nil && cabs == abs {
		return nil, fmt.Errorf("--output %s is the --cursor file; give the lines a file of their own", path)
	}
	// Read too: a save records a sum of the bytes before its length.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open output %s: %w", path, unwrapPath(err))
	}
	o := &Output{f: f, path: path, abs: abs}
	if err := o.reconcile(c, log); err != nil {
		f.Close()
		return nil, err
	}
	if err := c.bind(o); err != nil {
		f.Close()
		return nil, err
	}
	return o, nil
}

// reconcile reads the file's identity and length and, when c's mark
// records this very file shorter than it is now, cuts the lines written
// after the last save.
func (o *Output) reconcile(c *Cursor, log Logger) error {
	info, err := o.f.Stat()
	if err != nil {
		return fmt.Errorf("output %s: %w", o.path, unwrapPath(err))
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("--output %s is not a regular file; give a file path (or print to stdout without --output)", o.path)
	}
	o.dev, o.ino = fileID(info)
	size := info.Size()
	o.size.Store(size)
	m := c.mark
	resume := "where --offset says"
	if r := c.Resume(); r != wire.Null {
		resume = fmt.Sprintf("offset %d", r)
	}
	switch {
	case m == nil:
		if c.Last() != wire.Null && size > 0 {
			log.Warn(fmt.Sprintf("cursor %s records no length of %s (it was saved without --output), so nothing is cut; appending from %s: rows written after its last save may appear twice, this once", c.path, o.path, resume))
		}
		return nil
	case !o.same(m) && m.Path == o.abs:
		log.Warn(fmt.Sprintf("%s is another file than the one cursor %s recorded at that path (it was rotated or replaced), so nothing is cut; appending from %s", o.path, c.path, resume))
		return nil
	case !o.same(m):
		log.Warn(fmt.Sprintf("%s is not %s, the file cursor %s recorded, so nothing is cut; appending from %s", o.path, m.Path, c.path, resume))
		return nil
	case size < m.Bytes:
		log.Warn(fmt.Sprintf("%s holds %d bytes, fewer than the %d cursor %s recorded: it was cut or rewritten by something else, so nothing is cut; appending from %s", o.path, size, m.Bytes, c.path, resume))
		return nil
	}
	if m.Sum != "" {
		sum, err := o.sum(m.Bytes)
		if err != nil {
			return err
		}
		if sum != m.Sum {
			log.Warn(fmt.Sprintf("%s does not end as cursor %s recorded at byte %d: it was rewritten by something else, so nothing is cut; appending from %s", o.path, c.path, m.Bytes, resume))
			return nil
		}
	}
	if size == m.Bytes {
		return nil
	}
	lines, err := o.countLines(m.Bytes)
	if err != nil {
		return err
	}
	if err := o.f.Truncate(m.Bytes); err != nil {
		return fmt.Errorf("cut output %s to the %d bytes cursor %s recorded: %w", o.path, m.Bytes, c.path, unwrapPath(err))
	}
	if err := o.f.Sync(); err != nil {
		return fmt.Errorf("sync output %s: %w", o.path, err)
	}
	o.size.Store(m.Bytes)
	log.Warn(fmt.Sprintf("cut the last %d bytes (%s) of %s: they were written after the position saved in %s, and the rows are sent again from %s", size-m.Bytes, linesText(lines), o.path, c.path, resume))
	return nil
}

// same reports whether m records this file: the same device and inode,
// or the same absolute path where the platform has no file ids.
func (o *Output) same(m *outputMark) bool {
	if o.ino != 0 && m.Ino != 0 {
		return o.dev == m.Dev && o.ino == m.Ino
	}
	return o.abs == m.Path
}

// countLines counts the lines from byte from to the end: newlines, plus
// one for a last line a kill cut short.
func (o *Output) countLines(from int64) (int64, error) {
	r, err := os.Open(o.path)
	if err != nil {
		return 0, fmt.Errorf("read output %s: %w", o.path, unwrapPath(err))
	}
	defer r.Close()
	var (
		n    int64
		last byte = '\n'
		buf       = make([]byte, 64<<10)
	)
	sr := io.NewSectionReader(r, from, 1<<62)
	for {
		k, err := sr.Read(buf)
		for _, b := range buf[:k] {
			if b == '\n' {
				n++
			}
		}
		if k > 0 {
			last = buf[k-1]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read output %s: %w", o.path, err)
		}
	}
	if last != '\n' {
		n++
	}
	return n, nil
}

func linesText(n int64) string {
	if n == 1 {
		return "1 row"
	}
	return fmt.Sprintf("%d rows", n)
}

// mark is what a cursor records of o when the lines up to its offset end
// at byte size.
func (o *Output) mark(size int64) (*outputMark, error) {
	sum, err := o.sum(size)
	if err != nil {
		return nil, err
	}
	return &outputMark{Path: o.abs, Bytes: size, Dev: o.dev, Ino: o.ino, Sum: sum}, nil
}

// sumWindow is how many bytes before a mark's length its Sum covers: the
// last line or more of a tail's output, which holds the row's offset or
// its own values.
const sumWindow = 4 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sum returns the CRC-32C, in hex, of the (up to) sumWindow bytes of the
// file before end.
func (o *Output) sum(end int64) (string, error) {
	from := max(end-sumWindow, 0)
	b := make([]byte, end-from)
	if _, err := o.f.ReadAt(b, from); err != nil {
		return "", fmt.Errorf("read back output %s: %w", o.path, unwrapPath(err))
	}
	return strconv.FormatUint(uint64(crc32.Checksum(b, castagnoli)), 16), nil
}

// Path returns the file's path as given.
func (o *Output) Path() string { return o.path }

// Write appends p. The length it counts is what the next cursor save
// records once the rows in p are finished with.
func (o *Output) Write(p []byte) (int, error) {
	n, err := o.f.Write(p)
	o.size.Add(int64(n))
	return n, err
}

// Close syncs and closes the file.
func (o *Output) Close() error {
	serr := o.f.Sync()
	if err := o.f.Close(); err != nil {
		return fmt.Errorf("close output %s: %w", o.path, err)
	}
	if serr != nil {
		return fmt.Errorf("sync output %s: %w", o.path, serr)
	}
	return nil
}
