package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/streamcast/streamcast/pkg/broker/control"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/wire"
)

// This file is the server's side of the control API (package control):
// the registry opened at Run, the registered streams booted with the
// config's, and the Runtime through which the controller starts and stops
// one stream while every other stream serves on.

// ctlRuntime is the Server as control.Runtime sees it.
type ctlRuntime struct{ s *Server }

var _ control.Runtime = ctlRuntime{}

// bootControl opens the registry, replays what the last run left pending
// and adds the registered streams to serve to the registry of streams,
// before start opens every stream. Without a control: section it does
// nothing.
func (s *Server) bootControl(ctx context.Context) error {
	if s.cfg.Control == nil {
		return nil
	}
	reg, err := control.Open(ctx, s.cfg.RegistryPath())
	if err != nil {
		return err
	}
	ctl := control.New(&s.cfg, reg, ctlRuntime{s}, control.Options{
		Logger: s.logger, Executable: s.opts.Executable, ConfigFile: s.opts.ConfigFile,
	})
	serves, err := ctl.Boot(ctx)
	if err != nil {
		_ = reg.Close()
		return fmt.Errorf("control: replay the pending operations: %w", err)
	}
	s.ctlReg = reg
	for _, sv := range serves {
		s.reg.Add(sv.Stream.Name, s.newRegistered(sv))
	}
	s.control.Store(ctl)
	return nil
}

// newRegistered builds a registered stream: its log lives in its profile's
// storage.
func (s *Server) newRegistered(sv control.Serve) *stream {
	st := newStream(s, sv.Stream, sv.Schema, sv.Limits)
	storage := sv.Storage
	st.storage = &storage
	return st
}

// closeControl stops the controller's worker (an operation it was running
// stays pending for the next boot) before teardown takes lifeMu, which
// the worker's starts and stops take too.
func (s *Server) closeControl() {
	if ctl := s.control.Load(); ctl != nil {
		ctl.Close()
	}
}

// StartStream implements control.Runtime.
func (r ctlRuntime) StartStream(_ context.Context, sv control.Serve) (string, error) {
	s := r.s
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.state.Load() != stateReady {
		return "", errors.New("the server is starting or stopping")
	}
	if st := s.reg.Get(sv.Stream.Name); st != nil {
		return st.streamID(), nil
	}
	// Children and logs live as long as the server, not the operation.
	ctx := s.runCtx
	st := s.newRegistered(sv)
	if err := st.open(ctx, st.storage.Root); err != nil {
		return "", err
	}
	st.start()
	s.reg.Add(st.name, st)
	if err := s.restartMaintenance(ctx); err != nil {
		// Rows stay safe in the log's buffer; the stream serves on.
		s.logger.Error("the maintenance children did not take the new set of logs", "stream", st.name, "err", err)
	}
	s.logger.Info("stream started", "stream", st.name, "by", "control")
	return st.streamID(), nil
}

// StopStream implements control.Runtime, in Reload's order: out of the
// registry, fence and drain, the children told, then flush, 1001, close.
func (r ctlRuntime) StopStream(_ context.Context, name string) error {
	s := r.s
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	st := s.reg.Get(name)
	if st == nil {
		return nil
	}
	if st.storage == nil {
		return fmt.Errorf("stream %q is in the config's streams: list; the control API does not stop it", name)
	}
	s.reg.Remove(name)
	conns := st.beginStop(wire.WhyStreamStopped)
	st.fence(conns)
	st.drain()
	if err := s.restartMaintenance(s.runCtx); err != nil {
		s.logger.Error("the maintenance children did not take the new set of logs", "err", err)
	}
	return s.finishStop(st, conns)
}

// MigrateStream implements control.Runtime. The stream stays in the
// registry and its subscribers stay attached: only its writes stop. Its
// publishers are fenced and drained as StopStream does, then, once no
// connection is setting up or replaying (the swap lock), the children
// leave the old log, migrate runs over it (lent open: closing it here and
// reopening it there cost two WAL checkpoints, disk flushes the other
// streams' commits wait behind), it is closed, and the new log serves
// under the same fan-out set from the seam on: the one migrate made, kept
// open with the options serve opens logs with (closing it there and
// reopening it here cost the same again), or opened here.
func (r ctlRuntime) MigrateStream(ctx context.Context, sv control.Serve, migrate func(context.Context, *logstore.Log, []logstore.Option) (*logstore.Log, error)) (string, error) {
	s := r.s
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	name := sv.Stream.Name
	st := s.reg.Get(name)
	switch {
	case st == nil:
		return "", fmt.Errorf("stream %q is not served, so it cannot migrate online", name)
	case st.storage == nil:
		return "", fmt.Errorf("stream %q is in the config's streams: list; the control API does not migrate it", name)
	case st.relay != nil || st.log == nil:
		return "", fmt.Errorf("stream %q has no log of its own to migrate", name)
	}
	conns := st.fenceWrites(wire.WhyStreamMigrating)
	st.fence(conns)
	st.drain()

	st.life.swap.Lock()
	defer st.life.swap.Unlock()
	st.life.tiers.Store(nil)
	// The stream lets go of its log (the children's set of logs is the
	// streams' open ones), but the handle stays open for the migration.
	old := st.log
	st.log = nil
	// The children leave the old log before Migrate seals and fences it.
	if err := s.restartMaintenance(s.runCtx); err != nil {
		s.logger.Error("the maintenance children did not take the new set of logs", "err", err)
	}
	nst := s.newRegistered(sv)
	next, err := migrate(ctx, old, nst.logSpec().Options())
	// Done with the old log either way: a failed migration reopens it
	// (resumeOldLog) to check what it left.
	if cerr := old.Close(); cerr != nil {
		s.logger.Error("close the log after its migration", "stream", name, "err", cerr)
	}
	if err != nil && next != nil {
		_ = next.Close() // a migrate func hands over no log with an error; never leak one
	}
	if err != nil {
		// The old log is whole unless the migration got as far as its
		// intent (then it may be fenced, and only a rerun finishes it):
		// serve on it, the seam never moved.
		if rerr := st.resumeOldLog(s.runCtx); rerr != nil {
			s.logger.Error("the stream cannot serve its old log after its migration failed", "stream", name, "err", rerr)
			s.stopAfterFailedMigration(st)
			return "", err
		}
		if rerr := s.restartMaintenance(s.runCtx); rerr != nil {
			s.logger.Error("the maintenance children did not take the new set of logs", "stream", name, "err", rerr)
		}
		s.logger.Warn("stream migration failed; it serves on its old log", "stream", name, "log", st.log.Dir(), "end", st.endOffset.Load(), "err", err)
		return "", &control.MigrationFailed{Err: err, Serving: true}
	}
	err = st.swapLog(s.runCtx, nst, next)
	if err != nil {
		s.stopAfterFailedMigration(st)
		return "", err
	}
	st.unfence(true)
	if err := s.restartMaintenance(s.runCtx); err != nil {
		// Rows stay safe in the log's buffer; the stream serves on.
		s.logger.Error("the maintenance children did not take the new set of logs", "stream", name, "err", err)
	}
	s.logger.Info("stream migrated", "stream", name, "log", st.log.Dir(), "seam", st.endOffset.Load(), "by", "control")
	return st.streamID(), nil
}

// resumeOldLog serves st on the log its failed migration left: reopened
// as it was (same schema, same end, so the seam never moved, I1), its
// committer started again and its publishers let back in. A log the
// migration fenced, or whose metadata records its intent, is refused:
// it takes no rows until a rerun of the migration finishes it.
func (st *stream) resumeOldLog(ctx context.Context) error {
	seam := st.endOffset.Load()
	if err := st.openLog(ctx, st.storageConfig().Root); err != nil {
		return err
	}
	status, err := st.log.Status(ctx)
	switch {
	case err != nil:
	case status.Fenced:
		err = fmt.Errorf("its log %s was fenced by the migration", st.log.Dir())
	case st.end != seam:
		err = fmt.Errorf("its log %s ends at %d, not at %d where the migration began", st.log.Dir(), st.end, seam)
	}
	if err != nil {
		_ = st.closeLog()
		return err
	}
	st.inbox.Reopen()
	st.start()
	st.unfence(false)
	return nil
}

// stopAfterFailedMigration stops st whole, its subscribers too, as
// StopStream would, when it can serve neither log. The swap lock is held.
func (s *Server) stopAfterFailedMigration(st *stream) {
	s.reg.Remove(st.name)
	all := st.beginStop(wire.WhyStreamStopped)
	st.unfence(false)
	st.closeSubscribers(all)
	// A connection ending takes no swap lock; one waiting for it is
	// refused 4404 once it has it (register).
	st.waitConns(all, 2*closeGrace)
	_ = st.closeLog()
	_ = s.restartMaintenance(s.runCtx)
}

// Hold implements control.Runtime.
func (r ctlRuntime) Hold(name string) (release func()) {
	s := r.s
	s.heldMu.Lock()
	s.held[name]++
	s.heldMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.heldMu.Lock()
			defer s.heldMu.Unlock()
			if s.held[name]--; s.held[name] <= 0 {
				delete(s.held, name)
			}
		})
	}
}

// isHeld reports whether name is between a stop and a start that
// Hold announced.
func (s *Server) isHeld(name string) bool {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	return s.held[name] > 0
}

// Serves implements control.Runtime. While a migration swaps its log the
// stream is read (its subscribers stay) but not written.
func (r ctlRuntime) Serves(name string) control.Admission {
	s := r.s
	st := s.reg.Get(name)
	if st == nil {
		return control.Admission{}
	}
	if !st.life.swap.TryRLock() {
		return control.Admission{Served: true, Read: true}
	}
	defer st.life.swap.RUnlock()
	ready := len(s.cfg.Maintain.Roles()) == 0 || s.children.Current() != nil
	return control.Admission{Served: true, Read: true, Write: st.retirement() == nil, ChildrenReady: ready}
}

// Static implements control.Runtime. Names are compared by meta.Fold, as
// the config loader compares its own: two streams whose names differ only
// in case would share a directory on a case-insensitive file system.
func (r ctlRuntime) Static(name string) (string, bool) {
	key := meta.Fold(name)
	for _, st := range r.s.reg.List() {
		if st.storage == nil && meta.Fold(st.name) == key {
			return st.name, true
		}
	}
	for _, sc := range r.s.cfg.Streams {
		if meta.Fold(sc.Name) != key {
			continue
		}
		// What serves now decides over the config read at start: a
		// registered stream served under that very name holds it.
		if st := r.s.reg.Get(sc.Name); st != nil && st.storage != nil {
			continue
		}
		return sc.Name, true
	}
	return "", false
}

// Statics implements control.Runtime: the served streams that are not
// registered ones, by name.
func (r ctlRuntime) Statics() []control.StaticStream {
	var out []control.StaticStream
	for _, st := range r.s.reg.List() {
		if st.storage == nil {
			out = append(out, control.StaticStream{Name: st.name, StreamID: st.streamID()})
		}
	}
	slices.SortFunc(out, func(a, b control.StaticStream) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// streamID is the stream's id, "" for a live-only stream.
func (st *stream) streamID() string {
	if st.meta == nil {
		return ""
	}
	return st.meta.StreamID
}

// startedRegistered tells the controller how the registered streams
// Boot gave went: each open, or refused and out of the registry.
func (s *Server) startedRegistered(ctx context.Context, st *stream, err error) {
	if ctl := s.control.Load(); ctl != nil && st.storage != nil {
		ctl.Started(ctx, st.name, st.streamID(), err)
	}
}
