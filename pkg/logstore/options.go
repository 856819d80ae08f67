package logstore

import "time"

// Clock tells the time. A log reads the time only through its clock: the
// stamps it writes (sealed_us, a delete's due time) and every comparison
// with a retention or a grace. A test passes one it moves by hand instead
// of sleeping through an hour of grace; a nil Clock is the system clock.
// The broker reuses this type, so one clock reaches every log it opens.
type Clock func() time.Time

// Now is c's time, or the system's when c is nil.
func (c Clock) Now() time.Time {
	if c == nil {
		return time.Now()
	}
	return c()
}

// Option tunes one open handle of a log (Open, Create). Options are the
// process's, never stored in the log: another process opening the same log
// passes its own.
type Option func(*options)

// WithClock makes the handle read the time from c (nil: the system clock).
func WithClock(c Clock) Option {
	return func(o *options) { o.clock = c }
}

// WithNames gives the names of the log's stream and of the log, as the
// stream's metadata knows them, to a log created before logs stored its
// names: the handle takes them, and a writable open stores them for the
// log's life. A log that stores its names keeps its own: they, not the
// caller's, are its identity.
func WithNames(stream, log string) Option {
	return func(o *options) { o.stream, o.log = stream, log }
}

// WithOverride makes the handle apply a maintenance process's policy
// overrides: the retention, grace and S3 settings that o sets (non-zero
// fields only) replace the ones the log stores, for this handle alone.
func WithOverride(o Config) Option {
	return func(opts *options) { opts.override = o }
}

// WithReplicatedWAL tells a writing handle that a replicator ships the
// log's WAL (docs/design.md §4.9). The replicator holds a read transaction
// across its rounds and checkpoints the WAL itself once it has shipped it;
// SQLite's own checkpoint after a commit would meet that reader every time,
// copy what it may and start again at the next commit, several times the
// cost of the commit. So the handle checkpoints only once the WAL passes
// ReplicatedCheckpointPages, a bound for when no replicator runs.
func WithReplicatedWAL() Option {
	return func(o *options) { o.checkpointPages = ReplicatedCheckpointPages }
}

// ReplicatedCheckpointPages is the WAL size, in pages (4 KiB), past which a
// handle opened WithReplicatedWAL checkpoints it itself: 64 MiB.
const ReplicatedCheckpointPages = 16384

// options is what the Options of one handle set.
type options struct {
	clock    Clock
	override Config

	// stream and log name a log that stores no names (WithNames).
	stream, log string

	// checkpointPages, when set, is the write connections'
	// wal_autocheckpoint (SQLite's default, 1000, otherwise).
	checkpointPages int

	// idleClose, when positive, is how long a connection may go unused
	// before the handle closes it (WithIdleClose).
	idleClose time.Duration

	// crashPoint, when set, is called at the points between the steps of a
	// maintenance operation where a crash leaves work for recovery; an error
	// stops the step there, exactly as a crash would (nothing after it
	// runs). Tests set it through an Option of their own.
	crashPoint func(point string) error

	// chunkGroups and chunkBytes bound one read of the buffer during a
	// scan: enough rows that the query's cost vanishes per row, few enough
	// that memory stays small. Tests shrink them to make scans cross many
	// reads.
	chunkGroups int
	chunkBytes  int
}

func newOptions(opts []Option) options {
	o := options{chunkGroups: 1024, chunkBytes: 1 << 20}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// now is the handle's time.
func (l *Log) now() time.Time { return l.opts.clock.Now() }

// atCrashPoint returns the error the handle's crash hook (set only by
// tests) gives at point, a place between the parts of a step
// where a crash leaves work for recovery; nil outside tests. A step stops
// there on an error, as if the process had died.
func (l *Log) atCrashPoint(point string) error {
	if l.opts.crashPoint == nil {
		return nil
	}
	return l.opts.crashPoint(point)
}
