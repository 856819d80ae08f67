package auth

import (
	"sync"
	"time"
)

// Backoff slows down an address that keeps failing authentication: after
// FreeFailures failures in a row, each further one makes the address wait
// (Delay doubling from BackoffBase up to BackoffMax) before its next
// attempt is checked. Checks it skips cost no bcrypt, so a password guesser
// costs the server little. An address that stops failing is forgotten
// after BackoffForget. It is safe for concurrent use and owns no goroutine.
type Backoff struct {
	now func() time.Time

	mu    sync.Mutex
	addrs map[string]*strikes
}

// Backoff's schedule.
const (
	FreeFailures  = 3 // a user mistyping a password a few times is not slowed
	BackoffBase   = 250 * time.Millisecond
	BackoffMax    = 30 * time.Second
	BackoffForget = 10 * time.Minute
	// LogEvery is how often the failures of one address are logged: once
	// at the first, then at most once per interval, with a count.
	LogEvery = time.Minute
	// maxAddrs bounds the addresses remembered.
	maxAddrs = 65536
)

type strikes struct {
	failures int       // in a row
	last     time.Time // of the last failure
	until    time.Time // no check before this
	logged   time.Time // when a line was last written for it
	unlogged int       // failures since then not in a line
}

// NewBackoff returns an empty Backoff; now is its clock (time.Now when nil).
func NewBackoff(now func() time.Time) *Backoff {
	if now == nil {
		now = time.Now
	}
	return &Backoff{now: now, addrs: map[string]*strikes{}}
}

// Wait returns how long addr must still wait before its credentials are
// checked again; 0 when they may be checked now.
func (b *Backoff) Wait(addr string) time.Duration {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.addrs[addr]
	if s == nil || !now.Before(s.until) {
		return 0
	}
	return s.until.Sub(now)
}

// Failure is what Fail reports about one failed attempt.
type Failure struct {
	InARow int           // failures of the address in a row, this one included
	Delay  time.Duration // the wait it now serves (0: none yet)
	// Log is true when this failure should be logged; Unlogged then counts
	// the failures since the address's last line that were not.
	Log      bool
	Unlogged int
}

// Fail records a failed attempt by addr.
func (b *Backoff) Fail(addr string) Failure {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.addrs[addr]
	if s != nil && now.Sub(s.last) >= BackoffForget {
		s.failures = 0
	}
	if s == nil {
		if len(b.addrs) >= maxAddrs {
			b.forgetLocked(now)
		}
		s = &strikes{}
		b.addrs[addr] = s
	}
	s.failures++
	s.last = now
	f := Failure{InARow: s.failures}
	if n := s.failures - FreeFailures; n > 0 {
		f.Delay = BackoffMax
		if n < 20 && BackoffBase<<(n-1) < BackoffMax {
			f.Delay = BackoffBase << (n - 1)
		}
		s.until = now.Add(f.Delay)
	}
	if s.logged.IsZero() || now.Sub(s.logged) >= LogEvery {
		f.Log, f.Unlogged = true, s.unlogged
		s.logged, s.unlogged = now, 0
	} else {
		s.unlogged++
	}
	return f
}

// Succeed forgets addr's failures: it proved it knows a password.
func (b *Backoff) Succeed(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.addrs[addr]; s != nil && s.failures > 0 {
		delete(b.addrs, addr)
	}
}

// forgetLocked drops addresses quiet for BackoffForget, then, if the map is
// still full, any that serve no wait now.
func (b *Backoff) forgetLocked(now time.Time) {
	for a, s := range b.addrs {
		if now.Sub(s.last) >= BackoffForget {
			delete(b.addrs, a)
		}
	}
	for a, s := range b.addrs {
		if len(b.addrs) < maxAddrs {
			return
		}
		if !now.Before(s.until) {
			delete(b.addrs, a)
		}
	}
}
