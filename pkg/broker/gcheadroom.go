package broker

import (
	"runtime/debug"
	"sync"
)

// The filter bytes at which gcHeadroom narrows the collector's headroom,
// and below which it widens it again: apart, so that a count hovering near
// one bound does not flip the setting on every subscribe.
const (
	gcTightenAt = 32 << 20
	gcRelaxAt   = 16 << 20
)

// gcHeadroom narrows the garbage collector's headroom while compiled
// where= filters hold much memory. The collector lets the heap grow to
// (1 + GOGC/100) times what was live after its last cycle. Filters stay
// live as long as their subscribers do and never turn into garbage in
// between, so the part of the headroom proportional to them is memory the
// process takes from the machine and does not use: a thousand subscribers
// with distinct 64 KiB filters (about 80 MiB of them) let the heap reach
// twice that while they arrive. Halving the percentage while the filters
// hold gcTightenAt or more halves that; it goes back once they hold under
// gcRelaxAt. A cycle costs in proportion to what is live, not to the
// headroom, so the narrower headroom means more cycles of the same cost,
// paid only while large filters are there.
//
// The setting is the process's, so only the process's owner turns this on
// (Options.TuneGC); a nil *gcHeadroom does nothing.
type gcHeadroom struct {
	mu    sync.Mutex
	base  int // the process's GC percentage when the server was built; ≤ 0 is left alone
	tight bool
}

func newGCHeadroom() *gcHeadroom {
	base := debug.SetGCPercent(100) // read the setting (GOGC, or 100) ...
	debug.SetGCPercent(base)        // ... and leave it as it was
	return &gcHeadroom{base: base}
}

// update narrows or widens the headroom for held bytes of filters.
func (g *gcHeadroom) update(held int64) {
	if g == nil || g.base <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case !g.tight && held >= gcTightenAt:
		g.tight = true
		debug.SetGCPercent(max(g.base/2, 10))
	case g.tight && held < gcRelaxAt:
		g.tight = false
		debug.SetGCPercent(g.base)
	}
}
