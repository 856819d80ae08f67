package control

import (
	"context"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/schema"
)

// Runtime is what the controller needs of the running server: start and
// stop one registered stream while every other stream serves on, and see
// what it serves. pkg/broker implements it; the controller never touches
// a connection, nor a log that is open for serving: MigrateStream lends
// the migration its log only once the log's writes are fenced and its
// committer stopped.
type Runtime interface {
	// StartStream opens the stream's log as storage says (the I8 checks
	// apply: a log its metadata names is never created afresh) and serves
	// it. It returns the stream's id.
	StartStream(ctx context.Context, s Serve) (streamID string, err error)
	// StopStream stops serving name: new connections are refused, its
	// publishers are fenced and closed with 1001 once what they sent is
	// committed and acknowledged, its subscribers get 1001, its log is
	// flushed and closed. Stopping a stream that is not served does nothing.
	StopStream(ctx context.Context, name string) error
	// MigrateStream moves the served stream sv names to a new log while
	// its subscribers stay connected: its writes are fenced and its
	// publishers closed with 1001 once what they sent is acknowledged,
	// migrate runs over its log (lent to it still open as the Writer, so
	// the migration neither closes nor reopens it: lifecycle.Options.Current),
	// the log is closed, and the new log (as sv declares it) serves from
	// the seam on. migrate is given the options the runtime serves a log
	// with, and returns the new log open as the Writer with them, which
	// the runtime then owns and serves rather than closing and reopening
	// it (lifecycle.Options.KeepNext), or nil for the runtime to open it.
	// On failure the stream is stopped. It returns the stream's id.
	MigrateStream(ctx context.Context, sv Serve, migrate func(ctx context.Context, current *logstore.Log, next []logstore.Option) (*logstore.Log, error)) (streamID string, err error)
	// Hold tells connections that arrive for name while it is not served
	// to retry (1001, why stream_retiring) rather than that no such stream
	// exists, until release is called: for a change that stops a stream
	// and serves it again.
	Hold(name string) (release func())
	// Serves reports what the server does with name now.
	Serves(name string) Admission
	// Static reports whether name is one of the config's streams: list,
	// which the control API never manages, compared by meta.Fold (names
	// that differ only in case share a directory on a case-insensitive
	// file system). It returns the static stream's name as the config
	// spells it.
	Static(name string) (static string, ok bool)
	// Statics lists the streams of the config's streams: list the server
	// serves now, by name, so a client of the API sees every stream the
	// server serves.
	Statics() []StaticStream
}

// StaticStream is a stream of the config file as the API lists it.
type StaticStream struct {
	Name     string
	StreamID string // "" for a live-only stream
}

// Serve is a registered stream as the runtime serves it.
type Serve struct {
	Stream  config.Stream  // durable, with the declaration's settings
	Schema  *schema.Schema // compiled
	Limits  config.Limits  // the server's, with the declaration's laid over
	Storage config.Config  // the server's config with the profile's storage (config.ProfileConfig)
}

// Admission is what the runtime lets through for one stream now.
type Admission struct {
	Served        bool // in the server's registry: connections reach it
	Read          bool // subscribers are admitted
	Write         bool // publishers are admitted (not retired, not fenced)
	ChildrenReady bool // the maintenance children run over its log
}

// MigrationFailed is MigrateStream's error when the migration failed
// before it touched the stream's log: the stream serves on that log from
// the same end (Serving), so the migration may be retried, fixed, with
// no offset lost or reissued.
type MigrationFailed struct {
	Err     error
	Serving bool // the stream serves on its old log
}

func (e *MigrationFailed) Error() string {
	if e.Serving {
		return e.Err.Error() + "; the stream serves on its old log"
	}
	return e.Err.Error()
}

func (e *MigrationFailed) Unwrap() error { return e.Err }
