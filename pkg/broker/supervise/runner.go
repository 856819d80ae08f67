package supervise

import (
	"sync"
	"sync/atomic"
)

// Runner holds the Group serve runs now, which is replaced whole when the
// set of logs changes, and keeps the restarts of the Groups it replaced, so
// the restart counters /metrics reports never go down. The zero Runner
// holds none. Safe for concurrent use.
type Runner struct {
	cur atomic.Pointer[Group]

	// mu makes folding a replaced Group's restarts into restarts and
	// swapping cur one step for Restarts.
	mu       sync.Mutex
	restarts map[string]int64 // restarts of the children of replaced Groups, by role
}

// Current returns the Group running now, nil when there is none.
func (r *Runner) Current() *Group { return r.cur.Load() }

// Replace stores g (nil: none) as the running Group and returns the one it
// replaced, whose children's restarts it keeps. It neither starts g nor
// halts the old Group: the caller does.
func (r *Runner) Replace(g *Group) (old *Group) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old = r.cur.Swap(g); old != nil && old != g {
		if r.restarts == nil {
			r.restarts = map[string]int64{}
		}
		for _, c := range old.Stats() {
			r.restarts[c.Role] += int64(c.Restarts)
		}
	}
	return old
}

// Restarts returns the children's restarts since serve started, by role:
// those of the Group running now plus those of the Groups replaced.
func (r *Runner) Restarts() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64, len(r.restarts))
	for role, n := range r.restarts {
		out[role] = n
	}
	if g := r.cur.Load(); g != nil {
		for _, c := range g.Stats() {
			out[c.Role] += int64(c.Restarts)
		}
	}
	return out
}
