package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// The streams served live in Server.reg (a streamRegistry): streams come
// and go while the others serve (Server.Reload), so every lookup goes
// through it. A stream leaves the registry before it starts stopping: a
// connection that arrives afterwards is refused 4404, never attached to a
// half-stopped stream (see attached.Register for one that looked it up
// just before).

// streamLife is what starting and stopping one stream takes, beside its
// log and its fan-out set: the connections attached to it and its
// publisher readers (attached, life.go), and its committer goroutine,
// which the stream owns and waits for.
type streamLife struct {
	attached[*wsConn]

	// swap guards what a migration replaces under the stream's
	// subscribers (log, schema, metadata, marks: swapLog). A connection
	// holds it for reading while it sets up and while its replay reads the
	// log; the migration holds it for writing. The fan-out (deliver) never
	// takes it, so the hot path pays nothing for it.
	swap sync.RWMutex

	committed <-chan struct{} // closed when the committer returned; nil when none started

	// tiers is the log /stats reads the tiers of: set once the log is open,
	// cleared before it is closed (nil on a live-only stream).
	tiers atomic.Pointer[logstore.Log]
}

// hold takes st's swap lock for reading: what a connection reads of st
// while it sets up stays put until the returned release, which is
// idempotent and may run on another goroutine (a replay's).
func (st *stream) hold() (release func()) {
	st.life.swap.RLock()
	var once sync.Once
	return func() { once.Do(st.life.swap.RUnlock) }
}

// start makes an open stream serve: /stats reads its log and, on a durable
// stream, its committer runs until drain.
func (st *stream) start() {
	if st.relay != nil {
		st.life.tiers.Store(st.log)
		st.startRelay()
		return
	}
	if st.log == nil {
		return
	}
	st.life.tiers.Store(st.log)
	done := make(chan struct{})
	st.life.committed = done
	go func() {
		defer close(done)
		st.commit()
	}()
}

// beginStop marks st stopping (no connection or publisher reader joins it
// from now on) and returns the connections to close. why is the 1001's.
func (st *stream) beginStop(why string) []*wsConn { return st.life.BeginStop(why) }

// fence stops reading st's publishers; what they sent so far is accepted,
// the max_inbound bound notwithstanding. It returns once no reader can
// queue a row any more.
func (st *stream) fence(conns []*wsConn) {
	for _, c := range conns {
		if c.pub != nil {
			c.pub.fence()
		}
	}
	st.inbox.Stop()
	st.life.WaitReaders()
}

// drain closes the inbox and waits for the committer to commit, fan out and
// acknowledge everything queued (I3). Each publisher then closes itself
// with 1001, once its replies are written (see Server.publish).
func (st *stream) drain() {
	if st.relay != nil {
		st.relay.Stop()
	}
	st.inbox.Close()
	if st.life.committed != nil {
		<-st.life.committed
	}
}

// closeSubscribers queues 1001 to every subscriber of st, behind the frames
// already queued for it.
func (st *stream) closeSubscribers(conns []*wsConn) {
	reason := st.life.GoingAway()
	for _, c := range conns {
		if c.pub == nil {
			c.close(websocket.CloseGoingAway, reason)
		}
	}
}

// waitConns waits for every connection of st to end, dropping those still
// open after the grace.
func (st *stream) waitConns(conns []*wsConn, grace time.Duration) bool {
	return st.life.WaitConns(conns, grace, (*wsConn).abort)
}

// fenceWrites begins a migration of st: no publisher reader joins it from
// now on, and the publishers it has get 1001 (why) once what they sent is
// committed and acknowledged. Its subscribers stay. It returns the
// connections to fence.
func (st *stream) fenceWrites(why string) []*wsConn { return st.life.Fence(why) }

// unfence ends a migration: publishers join again, built from the
// generation bumped (swapLog).
func (st *stream) unfence(swapped bool) { st.life.Unfence(swapped) }

// swapLog serves next, st's successor log, to st's subscribers: the
// committer stopped and the old log closed, next's schema, sort order,
// metadata and marks replace the old ones and the committer starts over
// next. Its first offset is the old end (the seam), so the subscribers'
// offsets go on with no gap and no overlap (I1). The swap lock is held for
// writing.
func (st *stream) swapLog(ctx context.Context, next *stream, lg *logstore.Log) error {
	seam := st.endOffset.Load()
	st.cfg.Schema, st.cfg.SchemaFile, st.cfg.SortBy = next.cfg.Schema, next.cfg.SchemaFile, next.cfg.SortBy
	st.sch, st.schemaJSON = next.sch, next.schemaJSON
	if err := st.openLogWith(ctx, st.storageConfig().Root, lg); err != nil {
		return err
	}
	if st.end != seam {
		// Never seen: Migrate creates the next log at the old end. Serving
		// on would give the subscribers a gap or repeats.
		err := fmt.Errorf("stream %q: its new log %s starts at offset %d, not at the old log's end %d; stop the stream and run `streamcast migrate` offline",
			st.name, st.log.Dir(), st.end, seam)
		_ = st.closeLog()
		return err
	}
	st.refilter(seam)
	st.inbox.Reopen()
	st.start()
	return nil
}

// refilter recompiles every attached subscriber's where= against the
// schema the log from seam on has: a compiled filter finds its columns
// by their position in the schema it was compiled for, and a migration
// may add, remove or reorder columns. A filter the new schema refuses (a
// column removed, a null the column no longer allows) closes its
// subscriber with 4400, after the rows below the seam it was sent, naming
// the seam so it can subscribe again knowing where the schema changed.
// The committer is stopped and the swap lock held: no commit fans out.
func (st *stream) refilter(seam int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, sub := range st.subs {
		old := sub.held
		if old == nil {
			continue
		}
		// Let go of the old schema's filter before holding the new one,
		// so a migration needs room for one filter at a time, not twice
		// limits.max_filter_bytes.
		sub.held, sub.filter = nil, nil
		st.srv.filters.releaseFilter(old)
		f, err := st.srv.filters.acquire(st.sch, old.JSON())
		var full *FilterMemoryFull
		switch {
		case errors.As(err, &full):
			// The connection only waits to end.
			sub.c.close(full.Code(), full.Reason())
			st.srv.logger.Warn("subscriber closed: no room for its where= under the migrated schema", "stream", st.name, "seam", seam, "err", err)
		case err != nil:
			sub.c.close(wire.CloseBadRequest, (&wire.BadRequest{Detail: refilterDetail(seam, err)}).Reason())
			st.srv.logger.Info("subscriber closed: its where= does not fit the migrated schema", "stream", st.name, "where", string(old.JSON()), "seam", seam, "err", err)
		default:
			sub.held, sub.filter = f, f
		}
	}
}

// refilterDetail is the 4400 detail for a filter a migration's schema
// refuses. The seam and the column come first: the close reason keeps 80
// characters of it.
func refilterDetail(seam int64, err error) string {
	var fe *schema.FilterError
	if errors.As(err, &fe) && fe.Column != "" {
		return fmt.Sprintf("migrated at offset %d: where= column %q does not fit the new schema (%s)", seam, fe.Column, fe.Problem)
	}
	return fmt.Sprintf("migrated at offset %d: where= does not fit the new schema (%v)", seam, err)
}
