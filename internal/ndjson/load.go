package ndjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/streamcast/streamcast/internal/waitfor"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

const (
	// DefaultPollEvery is how often a followed file is checked for growth.
	DefaultPollEvery = 200 * time.Millisecond
	// DefaultProgressEvery is how often Progress hears the counts.
	DefaultProgressEvery = time.Second
	// frameOverhead is room kept in a frame for the batch brackets and an
	// exactly-once publisher's [seq, …] wrapper.
	frameOverhead = 32
	// loadChunk is how much input is read per read call.
	loadChunk = 256 << 10
)

// StdinName is the input name that reads LoadOptions.Stdin, and the file
// name quarantine records and messages give to it.
const StdinName = "-"

// LoadOptions configure Load: NDJSON rows read from files (or stdin),
// validated against the stream's schema and published to one stream.
// Start from DefaultLoadOptions: Validate refuses a value out of range
// rather than replacing it.
type LoadOptions struct {
	wire.DialOptions

	// Inputs are read in order as one concatenated input; "-" (StdinName)
	// is Stdin. None reads Stdin.
	Inputs []string
	// Stdin is read for "-" or when there are no Inputs. Load returns only
	// once its reader has stopped, so a Read that blocks must be
	// interruptible: Load sets a past read deadline on a Stdin that has
	// SetReadDeadline (an *os.File on a pipe or terminal in non-blocking
	// mode, a net.Conn; see Interruptible) when it stops early; any other
	// Stdin must return from Read on its own (a file, a buffer, a pipe its
	// writer closes).
	Stdin io.Reader
	// Publisher makes the load exactly once: each accepted row's seq is
	// its ordinal among the accepted rows of the whole input, so a rerun
	// with the same id and input skips what landed (the greeting's mark)
	// and sends the rest.
	Publisher string
	// SkipLines skips the first SkipLines lines of the input (the Inputs
	// read as one, blank lines counted) without reading them as rows: the
	// way to resume a load without a Publisher after the lines a stopped
	// run published, which its error names. It does not go with
	// Publisher, whose mark already skips what landed and whose seqs count
	// the rows of every line.
	SkipLines int64
	// BatchSize is the number of rows per publish frame, 1 or more.
	BatchSize int
	// Window sends a partial batch once it has waited this long; 0 waits
	// for a full batch (or the end of the input).
	Window time.Duration
	// MaxInFlight is the number of frames awaiting their ack, 1 or more;
	// match the server's max_in_flight.
	MaxInFlight int
	// HTTP publishes over plain HTTP (wire.PublishHTTP): one POST per
	// batch on keep-alive connections, one at a time, for hosts where a
	// WebSocket cannot reach the server. MaxInFlight and Coalesce do not
	// apply.
	HTTP bool
	// Coalesce is how long a frame may wait for others to share its
	// socket write (wire.PublishOptions.Coalesce). The frames of one read
	// of the input go out together and none waits for the next read, so
	// this bounds only a write nothing else flushed.
	Coalesce time.Duration
	// MaxFrameBytes bounds a publish frame; match the server's
	// max_message_bytes. A batch is cut short to stay under it; a row that
	// alone exceeds it is refused.
	MaxFrameBytes int
	// Quarantine receives each refused row as one NDJSON record
	// (QuarantineRecord), and the load goes on. nil stops the load at the
	// first refused row.
	Quarantine io.Writer
	// Follow keeps reading the last input as it grows until ctx ends; the
	// default reads to the end, waits for every ack and returns. Stdin as
	// the last input is read until it ends either way.
	Follow bool
	// PollEvery is how often a followed file is checked for growth.
	PollEvery time.Duration
	// Logger hears warnings; nil discards.
	Logger Logger
	// Progress, when set, is called about every ProgressEvery with the
	// counts so far.
	Progress      func(LoadSummary)
	ProgressEvery time.Duration
}

// DefaultLoadOptions returns the options of `streamcast publish` without
// flags: single-row frames, the server's default limits, stdin as input.
func DefaultLoadOptions() LoadOptions {
	return LoadOptions{
		BatchSize:     1,
		MaxInFlight:   wire.DefaultMaxInFlight,
		Coalesce:      time.Millisecond,
		MaxFrameBytes: wire.DefaultReadLimit,
		PollEvery:     DefaultPollEvery,
		ProgressEvery: DefaultProgressEvery,
	}
}

// Validate checks the options, naming the flag of `streamcast publish` that
// sets a bad one and what it may be. It never changes o.
func (o *LoadOptions) Validate() error {
	stdin := len(o.Inputs) == 0
	for _, name := range o.Inputs {
		stdin = stdin || name == StdinName
	}
	switch {
	case o.BatchSize < 1:
		return fmt.Errorf("--batch-size is %d; give 1 or more", o.BatchSize)
	case o.MaxInFlight < 1:
		return fmt.Errorf("--max-in-flight is %d; give 1 or more", o.MaxInFlight)
	case o.MaxFrameBytes <= frameOverhead:
		return fmt.Errorf("--max-frame-bytes is %d, too small to hold a row; give more than %d (the server's limits.max_message_bytes)", o.MaxFrameBytes, frameOverhead)
	case o.Window < 0:
		return fmt.Errorf("--window is %v; give a positive duration, or 0 for full batches only", o.Window)
	case o.Follow && o.PollEvery <= 0:
		return fmt.Errorf("--poll is %v; give a positive duration", o.PollEvery)
	case o.Progress != nil && o.ProgressEvery <= 0:
		return fmt.Errorf("the progress interval is %v; give a positive duration", o.ProgressEvery)
	case len(o.Publisher) > wire.MaxPublisherBytes:
		return fmt.Errorf("--publisher is %d bytes; give 1 to %d", len(o.Publisher), wire.MaxPublisherBytes)
	case o.SkipLines < 0:
		return fmt.Errorf("--skip-lines is %d; give 0 or more (the number of input lines to skip)", o.SkipLines)
	case o.SkipLines > 0 && o.Publisher != "":
		return fmt.Errorf("--skip-lines does not go with --publisher: the publisher's mark already skips the rows that landed, and a rerun with the same --publisher and input sends exactly the rest; drop --skip-lines")
	case stdin && o.Stdin == nil:
		return errors.New("no input: give files, or rows on stdin")
	}
	return nil
}

// LoadSummary is what a load did. Offsets are those of rows this run
// published (Null when none); ResumedFrom is the publisher's mark at the
// start (Null without a publisher).
type LoadSummary struct {
	Stream            string
	Publisher         string
	LinesRead         int64 // lines read, blank ones included
	BlankLines        int64 // blank lines, skipped
	SkippedLines      int64 // lines skipped unread (LoadOptions.SkipLines)
	RowsPublished     int64 // rows acked and appended by this run
	DuplicatesSkipped int64 // rows at or below the publisher's mark, not sent (or acked as duplicates)
	Quarantined       int64 // rows refused by the schema (or too big), set aside
	Frames            int64 // publish frames acked
	FirstOffset       int64
	LastOffset        int64
	ResumedFrom       int64 // the mark's last_seq: rows with seq ≤ it had landed
	ResumedOffset     int64 // the mark's last_offset
	Elapsed           time.Duration
	Complete          bool   // every input line was read and every frame acked
	Error             string // why the load stopped early ("" when it did not)
}

// RowsPerSecond is RowsPublished over Elapsed.
func (s LoadSummary) RowsPerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.RowsPublished) / s.Elapsed.Seconds()
}

// MarshalJSON writes the summary with snake_case keys, null for absent
// offsets, elapsed_s and rows_per_s.
func (s LoadSummary) MarshalJSON() ([]byte, error) {
	opt := func(v int64) *int64 {
		if v == wire.Null {
			return nil
		}
		return &v
	}
	var pub *string
	if s.Publisher != "" {
		pub = &s.Publisher
	}
	return json.Marshal(struct {
		Stream            string  `json:"stream"`
		Publisher         *string `json:"publisher"`
		LinesRead         int64   `json:"lines_read"`
		BlankLines        int64   `json:"blank_lines"`
		SkippedLines      int64   `json:"skipped_lines,omitempty"`
		RowsPublished     int64   `json:"rows_published"`
		DuplicatesSkipped int64   `json:"duplicates_skipped"`
		Quarantined       int64   `json:"quarantined"`
		Frames            int64   `json:"frames"`
		FirstOffset       *int64  `json:"first_offset"`
		LastOffset        *int64  `json:"last_offset"`
		ResumedFrom       *int64  `json:"resumed_from"`
		ResumedOffset     *int64  `json:"resumed_from_offset"`
		ElapsedS          float64 `json:"elapsed_s"`
		RowsPerS          float64 `json:"rows_per_s"`
		Complete          bool    `json:"complete"`
		Error             string  `json:"error,omitempty"`
	}{
		s.Stream, pub, s.LinesRead, s.BlankLines, s.SkippedLines, s.RowsPublished, s.DuplicatesSkipped, s.Quarantined, s.Frames,
		opt(s.FirstOffset), opt(s.LastOffset), opt(s.ResumedFrom), opt(s.ResumedOffset),
		roundTo(s.Elapsed.Seconds(), 3), roundTo(s.RowsPerSecond(), 0), s.Complete, s.Error,
	})
}

func roundTo(f float64, digits int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', digits, 64), 64)
	return v
}

// QuarantineRecord is one line of a quarantine file: a refused input line,
// where it was, and why. Input is the line as text, since it may not be
// JSON at all.
type QuarantineRecord struct {
	File   string `json:"file"`
	Line   int64  `json:"line"`
	Reason string `json:"reason"`
	Input  string `json:"input"`
}

// LoadError is a load that stopped, worded for the command line. Err is
// the cause (*Rejected, *schema.RowError, a connection's error) for
// errors.As.
type LoadError struct {
	Msg string
	Err error
}

// Error is Msg.
func (e *LoadError) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *LoadError) Unwrap() error { return e.Err }

// ErrInterrupted is the cause of a LoadError for a load stopped by its
// context before the input's end (without Follow, where that is the way to
// stop).
var ErrInterrupted = errors.New("interrupted")

// position is a line of the concatenated input.
type position struct {
	input int
	line  int64 // in its input, from 1
	at    int64 // in the concatenated input, from 1: what SkipLines counts
}

// inflight is a frame sent and not yet acked.
type inflight struct {
	ack         *wire.Ack
	rows        int
	first, last position
}

// loader is one run of Load.
type loader struct {
	opts   LoadOptions
	names  []string
	log    Logger
	pub    publishConn
	sch    *schema.Schema
	mark   int64 // rows with ordinal ≤ mark landed earlier: skip them
	batch  int
	maxLen int

	// The building frame, owned by the main loop.
	frame       []byte
	rowsInFrame int
	frameFirst  position
	frameLast   position
	ordinal     int64 // accepted rows so far (the seq of the last one)
	carry       []byte
	pos         position // the line being read
	at          int64    // lines of the concatenated input handled so far

	acks      chan inflight
	collected chan struct{} // closed when the collector has settled every ack

	mu      sync.Mutex // guards sum and failErr (shared with the collector)
	sum     LoadSummary
	failErr error

	// What the acks after the first failed one said, owned by the
	// collector and read once it has settled every ack: the advice after a
	// failed frame depends on whether frames pipelined behind it landed.
	ackFailed   *inflight     // the first frame whose ack failed
	ackFailErr  error         // why it failed
	lostAfter   []inflight    // later frames that certainly did not land
	landedAfter []inflight    // later frames that landed
	unsureAfter bool          // a later frame's fate is unknown (connection lost)
	failed      chan struct{} // closed on the first failure
	failOnce    sync.Once
}

// Load publishes the NDJSON rows of opts.Inputs (or opts.Stdin) to the
// stream at rawURL, pipelined up to MaxInFlight frames, and returns what it
// did. Each row is validated against the greeting's schema with the code the
// server runs, so a row the schema refuses is quarantined (or stops the
// load) before it is sent; blank lines are skipped.
//
// It returns nil once every line was read and every frame acked, or, with
// Follow, once ctx ends and every frame sent was acked. Otherwise it returns
// a *LoadError; the summary is filled in either way.
func Load(ctx context.Context, rawURL string, opts LoadOptions) (LoadSummary, error) {
	started := time.Now()
	l := &loader{opts: opts, log: opts.Logger, acks: make(chan inflight, 1024), collected: make(chan struct{}), failed: make(chan struct{})}
	l.sum = LoadSummary{Publisher: opts.Publisher, FirstOffset: wire.Null, LastOffset: wire.Null, ResumedFrom: wire.Null, ResumedOffset: wire.Null}
	if err := opts.Validate(); err != nil {
		return l.sum, err
	}
	if l.log == nil {
		l.log = nopLogger{}
	}
	l.batch = opts.BatchSize
	l.maxLen = opts.MaxFrameBytes
	l.names = opts.Inputs
	if len(l.names) == 0 {
		l.names = []string{StdinName}
	}
	if opts.Follow && l.names[len(l.names)-1] == StdinName {
		// stdin is followed by nature: it is read until it ends.
		l.opts.Follow = false
	}
	// Open every file first, so a missing one fails before anything is sent.
	files := make([]io.Reader, len(l.names))
	for i, name := range l.names {
		if name == StdinName {
			files[i] = opts.Stdin
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			return l.sum, fmt.Errorf("input: %w", err)
		}
		defer f.Close()
		files[i] = f
	}

	// Acks are awaited without ctx: a stopped load still collects the acks
	// of what it sent, so the summary is exact.
	netCtx := context.WithoutCancel(ctx)
	pub, err := dialPublisher(ctx, rawURL, opts)
	if err != nil {
		return l.sum, &LoadError{Msg: err.Error(), Err: err}
	}
	l.pub = pub
	g := pub.Greeting()
	l.sum.Stream = g.Stream
	if g.Schema != nil {
		if l.sch, err = schema.Compile(g.Schema); err != nil {
			pub.Close()
			return l.sum, fmt.Errorf("the stream's schema (from the greeting) does not compile here: %w", err)
		}
	} else {
		l.sch = schema.Any()
	}
	if opts.Publisher != "" && g.Publisher != nil {
		l.mark = g.Publisher.LastSeq
		l.sum.ResumedFrom, l.sum.ResumedOffset = g.Publisher.LastSeq, g.Publisher.LastOffset
	}

	go l.collect()
	stopProgress := l.progress(started)

	readCtx, stopReading := context.WithCancel(ctx)
	chunks := make(chan loadChunkMsg, 4)
	free := make(chan []byte, 6)
	for range cap(free) {
		free <- make([]byte, loadChunk)
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		l.read(readCtx, files, chunks, free)
	}()

	stopErr := l.run(ctx, netCtx, chunks, free)
	pub.Flush() // the last frames (a last line without a newline) wait for nothing
	stopReading()
	// The reader never blocks on a send once stopped; a read blocked on a
	// quiet input is cut short through its deadline, where it has one.
	// Wait for it either way: a reader left behind would outlive Load.
	select {
	case <-readerDone:
	default:
		interruptReads(files, time.Unix(1, 0))
		<-readerDone
		interruptReads(files, time.Time{}) // hand the input back as it came
	}

	close(l.acks)
	<-l.collected
	stopProgress()
	cerr := pub.Close()

	l.mu.Lock()
	defer l.mu.Unlock()
	l.sum.Elapsed = time.Since(started)
	if l.ackFailed != nil {
		// Worded now that every ack is settled: the way to resume depends
		// on what the frames behind the failed one did.
		stopErr = l.ackError(*l.ackFailed, l.ackFailErr)
	} else if l.failErr != nil {
		stopErr = l.failErr
	}
	if stopErr == nil && cerr != nil {
		stopErr = &LoadError{Msg: "closing the publisher: " + cerr.Error(), Err: cerr}
	}
	if stopErr == nil && opts.Publisher != "" && l.ordinal < l.mark {
		l.log.Warn("the publisher's mark is past this input's end: its rows were all published before, and more; check that --publisher names this input's loader",
			"publisher", opts.Publisher, "mark", l.mark, "accepted_rows", l.ordinal)
	}
	if stopErr == nil && l.at < opts.SkipLines {
		l.log.Warn("--skip-lines is past this input's end: every line was skipped and nothing was sent; check that it names this input",
			"skip_lines", opts.SkipLines, "lines", l.at)
	}
	if stopErr == nil && l.opts.Follow && opts.Publisher == "" && l.at > opts.SkipLines {
		// A followed load stops only by its context: the next run goes on
		// from here only if told where here is.
		l.log.Info(fmt.Sprintf("stopped after %d input lines, every row sent acked; to go on without publishing them again, rerun with --skip-lines %d", l.at, l.at),
			"lines", l.at)
	}
	if stopErr != nil {
		l.sum.Error = stopErr.Error()
	} else {
		l.sum.Complete = true
	}
	return l.sum, stopErr
}

// publishConn is a publisher connection: a WebSocket (wire.Publisher) or
// plain HTTP (wire.HTTPPublisher).
type publishConn interface {
	Greeting() *wire.Greeting
	Submit(ctx context.Context, frame []byte) (*wire.Ack, error)
	Flush()
	Close() error
}

// dialPublisher connects the load's publisher, over HTTP with opts.HTTP.
func dialPublisher(ctx context.Context, rawURL string, opts LoadOptions) (publishConn, error) {
	po := wire.PublishOptions{DialOptions: opts.DialOptions, Publisher: opts.Publisher, MaxInFlight: opts.MaxInFlight, Coalesce: opts.Coalesce}
	if opts.HTTP {
		return wire.PublishHTTP(ctx, rawURL, po)
	}
	return wire.Publish(ctx, rawURL, po)
}

// interruptReads sets the read deadline of every input that has one: a
// time in the past ends a blocked Read, the zero time clears it.
func interruptReads(inputs []io.Reader, at time.Time) {
	for _, f := range inputs {
		if d, ok := f.(interface{ SetReadDeadline(time.Time) error }); ok {
			_ = d.SetReadDeadline(at)
		}
	}
}

// loadChunkMsg is one read from an input: data, or the input's end, or
// (following) the moment its current end was reached.
type loadChunkMsg struct {
	input int
	data  []byte // from the free pool; nil for the markers
	eof   bool   // the input ended: a last line without a newline is complete
	idle  bool   // following: nothing more to read for now
	err   error
}

// read reads the inputs in order and hands their bytes to the main loop.
func (l *loader) read(ctx context.Context, files []io.Reader, out chan<- loadChunkMsg, free chan []byte) {
	send := func(m loadChunkMsg) bool {
		select {
		case out <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	poll := l.opts.PollEvery
	for i, f := range files {
		follow := l.opts.Follow && i == len(files)-1
		var size int64
		idleSent := false
		for {
			var buf []byte
			select {
			case buf = <-free:
			case <-ctx.Done():
				return
			}
			n, err := f.Read(buf)
			if ctx.Err() != nil {
				return
			}
			if n > 0 {
				size += int64(n)
				idleSent = false
				if !send(loadChunkMsg{input: i, data: buf[:n]}) {
					return
				}
			} else {
				free <- buf
			}
			if err == nil {
				continue
			}
			if err != io.EOF {
				send(loadChunkMsg{input: i, err: fmt.Errorf("read %s: %w", l.names[i], err)})
				return
			}
			if !follow {
				if !send(loadChunkMsg{input: i, eof: true}) {
					return
				}
				break
			}
			if fi, ok := f.(*os.File); ok {
				if st, serr := fi.Stat(); serr == nil && st.Mode().IsRegular() && st.Size() < size {
					send(loadChunkMsg{input: i, err: fmt.Errorf("%s shrank from %d to %d bytes while being followed; it was truncated or replaced, so where to go on is unknown — rerun (with --publisher, the rerun skips what landed)", l.names[i], size, st.Size())})
					return
				}
			}
			if !idleSent {
				if !send(loadChunkMsg{input: i, idle: true}) {
					return
				}
				idleSent = true
			}
			if !waitfor.Sleep(ctx, poll) {
				return
			}
		}
	}
}

// run is the main loop: split chunks into lines, validate and batch them,
// send frames. It returns why it stopped early (nil at the input's end, or
// when a followed load is stopped by ctx).
func (l *loader) run(ctx, netCtx context.Context, chunks <-chan loadChunkMsg, free chan<- []byte) error {
	var (
		timer   *time.Timer
		windowC <-chan time.Time
	)
	if l.opts.Window > 0 {
		timer = time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
	}
	armed := false
	arm := func() {
		if timer != nil && !armed && l.rowsInFrame > 0 {
			timer.Reset(l.opts.Window)
			windowC, armed = timer.C, true
		}
	}
	disarm := func() {
		if armed {
			timer.Stop()
			windowC, armed = nil, false
		}
	}
	flush := func() error {
		disarm()
		return l.flush(netCtx)
	}
	l.pos = position{input: 0, line: 0}
	current := 0
	for {
		select {
		case <-ctx.Done():
			if len(bytes.TrimSpace(l.carry)) > 0 {
				l.log.Warn("the last line has no newline yet, so it was not published", "file", l.names[current], "line", l.pos.line+1)
			}
			if err := flush(); err != nil {
				return err
			}
			if l.opts.Follow {
				return nil
			}
			return &LoadError{Msg: fmt.Sprintf("interrupted after %s:%d; what was sent is acked — %s", l.names[current], l.pos.line, l.resumeAfter(l.at)), Err: ErrInterrupted}
		case <-l.failed:
			return nil // the collector's error is the one reported
		case <-windowC:
			armed, windowC = false, nil
			if err := flush(); err != nil {
				return err
			}
			l.pub.Flush()
		case m := <-chunks:
			if m.err != nil {
				_ = flush()
				return &LoadError{Msg: m.err.Error(), Err: m.err}
			}
			if m.input != current {
				current = m.input
			}
			if m.data != nil {
				err := l.lines(m.input, m.data, flush)
				free <- m.data[:cap(m.data)]
				if err != nil {
					return err
				}
				// The chunk's frames leave together, and none waits
				// for the next read.
				l.pub.Flush()
				arm()
				continue
			}
			if m.eof {
				if len(l.carry) > 0 {
					line := l.carry
					l.carry = l.carry[:0]
					if err := l.line(m.input, line, flush); err != nil {
						return err
					}
				}
				if m.input == len(l.names)-1 {
					return flush()
				}
				l.pos = position{input: m.input + 1}
				arm()
				continue
			}
			if m.idle { // following: nothing more for now, so send what waits
				if err := flush(); err != nil {
					return err
				}
				l.pub.Flush()
			}
		}
	}
}

// lines splits data into lines, keeping a partial last line for the next
// chunk.
func (l *loader) lines(input int, data []byte, flush func() error) error {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			l.carry = append(l.carry, data...)
			return nil
		}
		line := data[:i]
		data = data[i+1:]
		if len(l.carry) > 0 {
			l.carry = append(l.carry, line...)
			line = l.carry
		}
		err := l.line(input, line, flush)
		l.carry = l.carry[:0]
		if err != nil {
			return err
		}
	}
	return nil
}

// line handles one input line: skip it if blank, refuse it, skip it as
// landed, or add it to the frame (sending the frame when full).
func (l *loader) line(input int, line []byte, flush func() error) error {
	l.pos.input = input
	l.pos.line++
	l.at++
	l.pos.at = l.at
	l.mu.Lock()
	l.sum.LinesRead++
	skip := l.at <= l.opts.SkipLines
	if skip {
		l.sum.SkippedLines++
	}
	l.mu.Unlock()
	if skip {
		return nil
	}
	line = bytes.TrimRight(line, " \t\r")
	if len(bytes.TrimLeft(line, " \t")) == 0 {
		l.mu.Lock()
		l.sum.BlankLines++
		l.mu.Unlock()
		return nil
	}
	start := len(l.frame)
	sep := 0
	if l.batch > 1 {
		if l.rowsInFrame == 0 {
			l.frame = append(l.frame[:0], '[')
			start = 0
		} else {
			l.frame = append(l.frame, ',')
		}
		sep = 1
	}
	var err error
	l.frame, err = l.sch.AppendCanonical(l.frame, line)
	rowLen := len(l.frame) - start - sep
	if err == nil && rowLen+frameOverhead > l.maxLen {
		err = &schema.RowError{Problem: fmt.Sprintf("the row is %d bytes, more than the %d a frame may hold (--max-frame-bytes, the server's max_message_bytes)", rowLen, l.maxLen)}
	}
	if err != nil {
		l.frame = l.frame[:start]
		if l.batch > 1 && l.rowsInFrame == 0 {
			l.frame = l.frame[:0]
		}
		return l.refuse(line, err, flush)
	}
	l.ordinal++
	if l.ordinal <= l.mark {
		l.frame = l.frame[:start]
		if l.batch > 1 && l.rowsInFrame == 0 {
			l.frame = l.frame[:0]
		}
		l.mu.Lock()
		l.sum.DuplicatesSkipped++
		l.mu.Unlock()
		return nil
	}
	if l.rowsInFrame > 0 && len(l.frame)+frameOverhead > l.maxLen {
		// The batch would be too big with this row: send it without, and
		// start the next batch with the row.
		row := append([]byte(nil), l.frame[start+sep:]...)
		l.frame = l.frame[:start]
		if err := flush(); err != nil {
			return err
		}
		if l.batch > 1 {
			l.frame = append(l.frame[:0], '[')
		}
		l.frame = append(l.frame, row...)
	}
	if l.rowsInFrame == 0 {
		l.frameFirst = l.pos
	}
	l.frameLast = l.pos
	l.rowsInFrame++
	if l.rowsInFrame >= l.batch {
		return flush()
	}
	return nil
}

// refuse quarantines a refused line, or stops the load at it.
func (l *loader) refuse(line []byte, cause error, flush func() error) error {
	name := l.names[l.pos.input]
	if l.opts.Quarantine == nil {
		// Send what came before the refused line, so the stream holds
		// exactly the input up to it.
		if err := flush(); err != nil {
			return err
		}
		return &LoadError{Msg: fmt.Sprintf("%s:%d: %v; %s", name, l.pos.line, cause, l.resumeAt(l.pos.at)), Err: cause}
	}
	rec, err := json.Marshal(QuarantineRecord{File: name, Line: l.pos.line, Reason: cause.Error(), Input: string(line)})
	if err != nil {
		return &LoadError{Msg: "quarantine: " + err.Error(), Err: err}
	}
	if _, err := l.opts.Quarantine.Write(append(rec, '\n')); err != nil {
		return &LoadError{Msg: fmt.Sprintf("%s:%d was refused (%v) but could not be quarantined: %v", name, l.pos.line, cause, err), Err: err}
	}
	l.mu.Lock()
	l.sum.Quarantined++
	l.mu.Unlock()
	return nil
}

// resumeAt advises how to send the input from line at (of the
// concatenated input) once the line is fixed, when every line before it is
// published and nothing from it on was sent. The refusal is reported only
// when every frame sent before it was acked (a failed ack's error replaces
// it), and run sends nothing after it, so the lines before it are exactly
// what landed: skipping them resends no row and leaves none out.
func (l *loader) resumeAt(at int64) string {
	before := at - 1
	switch {
	case l.opts.Publisher != "":
		return "nothing from this line on was sent — fix the line and rerun with the same --publisher and input: its mark skips the rows that landed (or add --quarantine FILE to set refused rows aside instead of stopping)"
	case before == 0:
		return "nothing was sent — fix the line and rerun (or add --quarantine FILE to set refused rows aside instead of stopping)"
	}
	return fmt.Sprintf("nothing from this line on was sent, and %s published — fix the line and rerun with --skip-lines %d to send from it (a plain rerun would publish those lines again), adding --quarantine FILE to set refused rows aside instead of stopping; next time, --publisher ID on an exactly_once stream makes a plain rerun safe",
		linesBefore(before), before)
}

// linesBefore names the n input lines before one, for "… published".
func linesBefore(n int64) string {
	if n == 1 {
		return "the line before it is"
	}
	return fmt.Sprintf("the %d lines before it are", n)
}

// resumeAfter advises how to load the rest of the input when its first
// `handled` lines were handled (published, skipped, blank or quarantined)
// and nothing after them was sent.
func (l *loader) resumeAfter(handled int64) string {
	switch {
	case l.opts.Publisher != "":
		return "rerun with the same --publisher and input to load the rest: its mark skips the rows that landed"
	case handled == 0:
		return "nothing was sent; rerun to load the input"
	}
	return fmt.Sprintf("rerun with --skip-lines %d to load the rest (a plain rerun would publish those %d lines again)", handled, handled)
}

// flush sends the building frame, if it holds rows.
func (l *loader) flush(ctx context.Context) error {
	if l.rowsInFrame == 0 {
		return nil
	}
	if l.batch > 1 {
		l.frame = append(l.frame, ']')
	}
	select {
	case <-l.failed:
		l.frame, l.rowsInFrame = l.frame[:0], 0 // the load is over; the collector's error is reported
		return nil
	default:
	}
	ack, err := l.pub.Submit(ctx, l.frame)
	if err != nil {
		return &LoadError{Msg: fmt.Sprintf("sending %s: %v", l.span(l.frameFirst, l.frameLast), err), Err: err}
	}
	l.acks <- inflight{ack: ack, rows: l.rowsInFrame, first: l.frameFirst, last: l.frameLast}
	l.frame = l.frame[:0]
	l.rowsInFrame = 0
	if cap(l.frame) > 4*l.maxLen {
		l.frame = nil
	}
	return nil
}

// span names a range of input lines: "a.ndjson:3" or "a.ndjson:3 to b.ndjson:7".
func (l *loader) span(a, b position) string {
	s := l.names[a.input] + ":" + strconv.FormatInt(a.line, 10)
	switch {
	case a == b:
		return s
	case a.input == b.input:
		return s + "-" + strconv.FormatInt(b.line, 10)
	}
	return s + " to " + l.names[b.input] + ":" + strconv.FormatInt(b.line, 10)
}

// collect settles acks in send order, counting what landed. The first error
// stops the load.
func (l *loader) collect() {
	defer close(l.collected)
	for f := range l.acks {
		<-f.ack.Done() // Wait would flush the frames run is still adding to
		offs, err := f.ack.Wait(context.Background())
		if err != nil {
			switch {
			case l.ackFailed == nil:
				l.ackFailed, l.ackFailErr = &f, err
			case landedNothing(err):
				l.lostAfter = append(l.lostAfter, f)
			default:
				l.unsureAfter = true
			}
			l.fail(err) // stops the load; Load words the error once every ack is in
			continue
		}
		if l.ackFailed != nil {
			l.landedAfter = append(l.landedAfter, f)
		}
		dup := f.ack.Duplicate()
		l.mu.Lock()
		l.sum.Frames++
		if dup {
			l.sum.DuplicatesSkipped += int64(f.rows)
		} else {
			l.sum.RowsPublished += int64(f.rows)
			if len(offs) > 0 && offs[0] != wire.Null {
				if l.sum.FirstOffset == wire.Null {
					l.sum.FirstOffset = offs[0]
				}
				l.sum.LastOffset = offs[len(offs)-1]
			}
		}
		l.mu.Unlock()
	}
}

// landedNothing tells whether a failed ack says that nothing of its frame
// was committed (rather than that its fate is unknown).
func landedNothing(err error) bool {
	var (
		rj *wire.Rejected
		cf *wire.CommitFailed
		sg *wire.SequenceGap
	)
	return errors.As(err, &rj) || errors.As(err, &cf) || errors.As(err, &sg)
}

// ackError words a failed frame, once every ack is settled.
func (l *loader) ackError(f inflight, err error) error {
	lines := l.span(f.first, f.last)
	var (
		rj *wire.Rejected
		cf *wire.CommitFailed
		sg *wire.SequenceGap
	)
	switch {
	case errors.As(err, &rj):
		return &LoadError{Msg: fmt.Sprintf("%s: the server refused a row this client's copy of the schema accepted, so client and server disagree: %s; nothing of that frame was committed — upgrade the older of the two, or quarantine the row by hand; %s", lines, rj.Detail, l.resumeAfterFailed(f)), Err: err}
	case errors.As(err, &cf):
		return &LoadError{Msg: fmt.Sprintf("%s: the server could not commit (%s); nothing of that frame was committed — %s", lines, cf.Detail, l.resumeAfterFailed(f)), Err: err}
	case errors.As(err, &sg):
		return &LoadError{Msg: fmt.Sprintf("%s: %v; another process may be publishing as %q — run one loader per publisher id", lines, err, l.opts.Publisher), Err: err}
	}
	return &LoadError{Msg: fmt.Sprintf("%s: %v; rows of frames not acked may or may not have landed — %s", lines, err, l.resumeAfterFailed(f)), Err: err}
}

// resumeAfterFailed advises how to send the rest after frame f failed,
// from what every later ack said. Frames are pipelined, so frames sent
// after f may have landed although f did not: then no --skip-lines resumes
// without a duplicate or a gap, and the advice says which lines are
// missing instead.
func (l *loader) resumeAfterFailed(f inflight) string {
	if l.opts.Publisher != "" {
		return "rerun with the same --publisher and input: its mark skips the rows that landed"
	}
	before := f.first.at - 1
	exact := "next time, --publisher ID on an exactly_once stream makes a plain rerun safe"
	if !landedNothing(l.ackFailErr) || l.unsureAfter {
		return fmt.Sprintf("%s published, but whether the rows sent from it on landed is unknown, so no rerun is sure to publish each row once: read the stream's newest rows (streamcast tail) to find the last line that landed, then rerun with --skip-lines set to its line number in the input; %s", linesBefore(before), exact)
	}
	if len(l.landedAfter) == 0 && before == 0 {
		return "nothing of this input landed: rerun to send it"
	}
	if len(l.landedAfter) == 0 {
		return fmt.Sprintf("%s published and nothing from it on landed: rerun with --skip-lines %d to send from it (a plain rerun would publish those lines again); %s", linesBefore(before), before, exact)
	}
	last := l.landedAfter[len(l.landedAfter)-1].last
	missing := l.span(f.first, f.last)
	for _, g := range l.lostAfter {
		if g.first.at < last.at { // those after the last that landed are resent by --skip-lines
			missing += ", " + l.span(g.first, g.last)
		}
	}
	return fmt.Sprintf("frames sent after it landed although it did not, so no --skip-lines resumes without a duplicate or a gap: publish only the lines that did not land (%s), then rerun with --skip-lines %d to send the lines after %s; %s", missing, last.at, l.span(last, last), exact)
}

func (l *loader) fail(err error) {
	l.mu.Lock()
	if l.failErr == nil {
		l.failErr = err
	}
	l.mu.Unlock()
	l.failOnce.Do(func() { close(l.failed) })
}

// progress calls opts.Progress about once every ProgressEvery until the
// returned stop is called.
func (l *loader) progress(started time.Time) (stop func()) {
	if l.opts.Progress == nil {
		return func() {}
	}
	every := l.opts.ProgressEvery
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				l.mu.Lock()
				s := l.sum
				l.mu.Unlock()
				s.Elapsed = time.Since(started)
				l.opts.Progress(s)
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}
