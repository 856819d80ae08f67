package broker

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// filterCache holds the compiled where= filters of every subscriber on the
// server, for two reasons. A compiled filter can be large (a 64 KiB list
// of strings compiles to about 100 KiB), so subscribers that send the same
// filter share one compiled form, counted once; and what all the distinct
// filters hold together is bounded by limits.max_filter_bytes, so many
// subscribers with large distinct filters cannot take the server's memory.
//
// A filter is a pure function of its schema and its text, so an entry is
// keyed by the schema it was compiled against (a migration swaps a
// stream's schema, and refilter compiles against the new one) and the
// filter's canonical echo. Each acquire is paired with one release; the
// entry, and the bytes it counts, go when the last holder lets go.
//
// Memory goes back to the OS soon after a burst: the Go runtime
// returns freed heap only after a collection that an idle server may not
// run for minutes, and then gradually, so a thousand subscribers leaving
// would leave their filters' memory resident; and a burst of large
// filters arriving leaves several times their size of transient memory
// (the request line, its decoding, the compile) resident beside them. So
// every entry made or dropped counts towards a reclaim (filterReclaim).
type filterCache struct {
	max     int64        // limits.max_filter_bytes
	seed    maphash.Seed // for keys
	refused atomic.Int64 // acquires refused for the bound, for /metrics
	held    atomic.Int64 // bytes the entries hold, for /metrics
	mu      sync.Mutex   // guards entries, byF and each entry's refs
	entries map[filterKey]*filterEntry
	byF     map[*schema.Filter]*filterEntry

	// reclaim returns memory to the OS after bursts of entries made or
	// dropped; its owner (Server.Run) runs it.
	reclaim *reclaimer
	// headroom narrows the collector's headroom while the entries hold
	// much (nil unless Options.TuneGC).
	headroom *gcHeadroom
}

// filterReclaim is the filter cache's reclaim policy. 8 MiB is about 85
// distinct 64 KiB filters, which leave several times that resident (their
// transient memory, or themselves); a burst is followed to its end, so
// what its last arrivals leave is given back too.
func filterReclaim() reclaimPolicy {
	return reclaimPolicy{
		Threshold: 8 << 20,
		Settle:    300 * time.Millisecond,
		MaxWait:   3 * time.Second,
		Interval:  3 * time.Second,
		Tail:      1 << 20,
		What:      "a burst of where= filters came or went",
	}
}

// filterKey finds an entry: the schema and a hash of the echo (entries
// whose echoes collide are chained).
type filterKey struct {
	sch *schema.Schema
	sum uint64
}

type filterEntry struct {
	sch  *schema.Schema
	f    *schema.Filter
	size int64
	refs int
	next *filterEntry // same key, another echo
}

func newFilterCache(max int64, logger *log.Logger) *filterCache {
	return &filterCache{
		max:     max,
		seed:    maphash.MakeSeed(),
		entries: map[filterKey]*filterEntry{},
		byF:     map[*schema.Filter]*filterEntry{},
		reclaim: newReclaimerWith(logger, filterReclaim()),
	}
}

// FilterMemoryFull is the refusal of a subscriber whose filter would take
// the memory the server's filters hold over limits.max_filter_bytes. It
// is temporary: the memory returns as other subscribers leave.
type FilterMemoryFull struct {
	Size, Held, Max int64
}

// closeTryAgainLater is RFC 6455's 1013: the server cannot take the
// request now and a client may retry later. pkg/wire maps no type to it,
// so its client retries it as it does any unmapped close (wire.Retryable).
const closeTryAgainLater = 1013

// Error says what was refused, why, and the ways out.
func (e *FilterMemoryFull) Error() string {
	return fmt.Sprintf("where= needs %d bytes, and the server's filters already hold %d of limits.max_filter_bytes %d; "+
		"retry later, send a shorter filter or one other subscribers already use, or raise limits.max_filter_bytes", e.Size, e.Held, e.Max)
}

// Code is 1013 (try again later).
func (e *FilterMemoryFull) Code() int { return closeTryAgainLater }

// Reason is {"error":"filter_memory_full","detail":…}, within the 123
// bytes a close reason may hold.
func (e *FilterMemoryFull) Reason() string {
	return wire.CloseReason("filter_memory_full", wire.Field{Key: "detail",
		Value: fmt.Sprintf("filters hold %d of limits.max_filter_bytes %d; retry later", e.Held, e.Max)})
}

// acquire returns the compiled filter for where against sch, compiling it
// only when no subscriber holds it yet, and counts one more holder. It
// returns nil for a filter that restricts nothing (nothing is held), a
// *schema.FilterError for a filter the schema refuses, and a
// *FilterMemoryFull when holding a new filter would pass the bound. A nil
// cache (a Server not built by New) compiles every filter afresh and
// bounds nothing.
func (c *filterCache) acquire(sch *schema.Schema, where []byte) (*schema.Filter, error) {
	if c == nil {
		f, err := sch.CompileFilter(where)
		if err != nil || f.All() {
			return nil, err
		}
		return f, nil
	}
	// A client that sends the echo it was greeted with (or the same text
	// as others) is served without compiling.
	c.mu.Lock()
	if e := c.lookupLocked(sch, where); e != nil {
		e.refs++
		c.mu.Unlock()
		return e.f, nil
	}
	full := c.max > 0 && c.held.Load() >= c.max
	c.mu.Unlock()
	if full {
		c.refused.Add(1)
		return nil, &FilterMemoryFull{Size: int64(len(where)), Held: c.held.Load(), Max: c.max}
	}
	f, err := sch.CompileFilter(where)
	if err != nil {
		return nil, err
	}
	if f.All() {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.lookupLocked(sch, f.JSON()); e != nil {
		e.refs++
		return e.f, nil
	}
	size := int64(f.Size())
	if held := c.held.Load(); c.max > 0 && held+size > c.max {
		c.refused.Add(1)
		return nil, &FilterMemoryFull{Size: size, Held: held, Max: c.max}
	}
	k := c.key(sch, f.JSON())
	c.entries[k] = &filterEntry{sch: sch, f: f, size: size, refs: 1, next: c.entries[k]}
	c.byF[f] = c.entries[k]
	c.headroom.update(c.held.Add(size))
	c.reclaim.Note(size)
	return f, nil
}

// releaseFilter lets go of one hold on f (nil: nothing), as acquired.
func (c *filterCache) releaseFilter(f *schema.Filter) {
	if c == nil || f == nil {
		return
	}
	c.mu.Lock()
	e := c.byF[f]
	if e == nil {
		c.mu.Unlock()
		return
	}
	if e.refs--; e.refs > 0 {
		c.mu.Unlock()
		return
	}
	delete(c.byF, f)
	k := c.key(e.sch, f.JSON())
	if head := c.entries[k]; head == e {
		if e.next == nil {
			delete(c.entries, k)
		} else {
			c.entries[k] = e.next
		}
	} else {
		for p := head; p != nil; p = p.next {
			if p.next == e {
				p.next = e.next
				break
			}
		}
	}
	c.headroom.update(c.held.Add(-e.size))
	c.mu.Unlock()
	c.reclaim.Note(e.size)
}

func (c *filterCache) key(sch *schema.Schema, echo []byte) filterKey {
	return filterKey{sch: sch, sum: maphash.Bytes(c.seed, echo)}
}

// lookupLocked finds the entry whose echo is exactly echo; c.mu is held.
func (c *filterCache) lookupLocked(sch *schema.Schema, echo []byte) *filterEntry {
	for e := c.entries[c.key(sch, echo)]; e != nil; e = e.next {
		if bytes.Equal(e.f.JSON(), echo) {
			return e
		}
	}
	return nil
}
