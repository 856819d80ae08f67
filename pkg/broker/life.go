package broker

import (
	"sync"
	"time"

	"github.com/streamcast/streamcast/internal/waitfor"
	"github.com/streamcast/streamcast/pkg/wire"
)

// attached is the attach-and-stop state of one stream, whose connections are
// of type C. The zero attached is ready to use: no connection, serving. Safe
// for concurrent use.
type attached[C comparable] struct {
	mu        sync.Mutex
	conns     map[C]struct{}
	stopping  bool
	fenced    bool   // migrating: no publisher reader joins, subscribers stay
	gen       int64  // bumped by each swap of the log; a publisher built before one is refused
	goingAway string // the 1001 reason its connections get once stopping or fenced

	handlers sync.WaitGroup // connections registered, until they end
	readers  sync.WaitGroup // publisher read loops still able to queue rows
}

// Register attaches c, so a stop returns it and waits for it. It reports
// false once the stream is stopping: the caller refuses the connection
// (4404), for the stream has left the registry.
func (l *attached[C]) Register(c C) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		return false
	}
	if l.conns == nil {
		l.conns = map[C]struct{}{}
	}
	l.conns[c] = struct{}{}
	l.handlers.Add(1)
	return true
}

// Unregister undoes Register, once the connection has ended.
func (l *attached[C]) Unregister(c C) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	l.handlers.Done()
}

// Conns returns the connections attached now.
func (l *attached[C]) Conns() []C {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.connsLocked()
}

func (l *attached[C]) connsLocked() []C {
	conns := make([]C, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	return conns
}

// AddReader counts a publisher read loop a stop must wait for (ReaderDone
// ends it); false once the stream is stopping or fenced for a migration,
// or when its log was swapped since the publisher was built in generation
// gen (it decodes by the old schema).
func (l *attached[C]) AddReader(gen int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping || l.fenced || l.gen != gen {
		return false
	}
	l.readers.Add(1)
	return true
}

// ReaderDone ends a read loop AddReader counted: it queues no row any more.
func (l *attached[C]) ReaderDone() { l.readers.Done() }

// WaitReaders returns once no read loop AddReader counted can queue a row.
func (l *attached[C]) WaitReaders() { l.readers.Wait() }

// GoingAway is the 1001 reason for the stream's connections.
func (l *attached[C]) GoingAway() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.goingAway == "" {
		return wire.GoingAwayReason(wire.WhyServerStopping)
	}
	return l.goingAway
}

// Generation is the number of log swaps so far.
func (l *attached[C]) Generation() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen
}

// BeginStop marks the stream stopping (no connection or publisher reader
// joins it from now on) and returns the connections to close. why is the
// 1001's, unless a fence set one first.
func (l *attached[C]) BeginStop(why string) []C {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopping = true
	if l.goingAway == "" {
		l.goingAway = wire.GoingAwayReason(why)
	}
	return l.connsLocked()
}

// Fence begins a migration: no publisher reader joins from now on, and
// the connections' 1001 says why. Its subscribers stay. It returns the
// connections to fence.
func (l *attached[C]) Fence(why string) []C {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fenced = true
	l.goingAway = wire.GoingAwayReason(why)
	return l.connsLocked()
}

// Unfence ends a migration: publishers join again, built from the
// generation bumped when the log was swapped.
func (l *attached[C]) Unfence(swapped bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fenced = false
	l.goingAway = ""
	if swapped {
		l.gen++
	}
}

// WaitConns waits up to grace for every registered connection to end; if
// some are still open it calls abort on each of conns and waits for them
// all, and reports false.
func (l *attached[C]) WaitConns(conns []C, grace time.Duration, abort func(C)) bool {
	if waitfor.Group(&l.handlers, grace) {
		return true
	}
	for _, c := range conns {
		abort(c)
	}
	l.handlers.Wait()
	return false
}
