package auth

import (
	"sync"
	"time"
)

// Backoff slows down a login that keeps failing. It counts attempts per
// Key, an address together with the user name tried, so a guesser behind
// a proxy that many clients share slows only the user it guesses at, not
// everyone behind that address.
//
// An attempt is counted as a failure when it starts (Attempt), not when
// bcrypt ends: many concurrent guesses then pass the check no more times
// than sequential ones would. After FreeFailures attempts in a row, each
// further one makes the key wait (Delay doubling from BackoffBase up to
// BackoffMax) before its next attempt is checked; a request refused for
// the wait costs no bcrypt. Succeed forgets the key; so does
// BackoffForget of quiet. Safe for concurrent use; it owns no goroutine.
type Backoff struct {
	now func() time.Time

	mu   sync.Mutex
	keys map[Key]*strikes
}

// Key is what the backoff counts attempts of: one address trying one user
// name. Every name that is not a configured user shares one key per
// address (User ""), so guessing names buys no fresh free attempts.
type Key struct {
	Addr string
	User string
}

// LoginKey is the backoff key of a login by addr as user under pol.
func LoginKey(addr, user string, pol *Policy) Key {
	if !pol.IsUser(user) {
		user = ""
	}
	return Key{Addr: addr, User: user}
}

// Backoff's schedule.
const (
	FreeFailures  = 3 // a user mistyping a password a few times is not slowed
	BackoffBase   = 250 * time.Millisecond
	BackoffMax    = 30 * time.Second
	BackoffForget = 10 * time.Minute
	// LogEvery is how often the failures of one key are logged: once at
	// the first, then at most once per interval, with a count.
	LogEvery = time.Minute
	// maxKeys bounds the keys remembered.
	maxKeys = 65536
)

type strikes struct {
	failures int       // attempts in a row not followed by a success
	last     time.Time // of the last attempt
	until    time.Time // no attempt is checked before this
	logged   time.Time // when a line was last written for it
	unlogged int       // failures since then not in a line
}

// NewBackoff returns an empty Backoff; now is its clock (time.Now when nil).
func NewBackoff(now func() time.Time) *Backoff {
	if now == nil {
		now = time.Now
	}
	return &Backoff{now: now, keys: map[Key]*strikes{}}
}

// Wait returns how long k must still wait before its credentials are
// checked again; 0 when they may be checked now.
func (b *Backoff) Wait(k Key) time.Duration {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.keys[k]
	if s == nil || !now.Before(s.until) {
		return 0
	}
	return s.until.Sub(now)
}

// Attempt admits an attempt by k to be checked, counting it as a failure
// until Succeed says otherwise, and returns 0; or, while k serves a wait,
// counts nothing and returns the wait left. The attempt that goes past the
// free ones is itself admitted and starts the wait for the next.
func (b *Backoff) Attempt(k Key) time.Duration {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.keys[k]
	if s != nil && now.Before(s.until) {
		return s.until.Sub(now)
	}
	if s != nil && now.Sub(s.last) >= BackoffForget {
		s.failures = 0
	}
	if s == nil {
		if len(b.keys) >= maxKeys {
			b.forgetLocked(now)
		}
		s = &strikes{}
		b.keys[k] = s
	}
	s.failures++
	s.last = now
	if d := delay(s.failures); d > 0 {
		s.until = now.Add(d)
	}
	return 0
}

// Abandon uncounts an attempt Attempt admitted that was never checked
// (the server was too busy to run bcrypt for it). The wait it may have
// started stays: a client refused for load retries later anyway.
func (b *Backoff) Abandon(k Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.keys[k]; s != nil && s.failures > 0 {
		s.failures--
	}
}

// delay is the wait the nth attempt in a row starts.
func delay(n int) time.Duration {
	n -= FreeFailures
	if n <= 0 {
		return 0
	}
	if n < 20 && BackoffBase<<(n-1) < BackoffMax {
		return BackoffBase << (n - 1)
	}
	return BackoffMax
}

// Failure is what Failed reports about one failed attempt.
type Failure struct {
	InARow int           // attempts of the key in a row, this one included
	Delay  time.Duration // the wait it now serves (0: none yet)
	// Log is true when this failure should be logged; Unlogged then counts
	// the failures since the key's last line that were not.
	Log      bool
	Unlogged int
}

// Failed reports on an attempt by k that failed, which Attempt counted
// already: how many in a row, the wait, and whether to log it.
func (b *Backoff) Failed(k Key) Failure {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.keys[k]
	if s == nil {
		// Forgotten under pressure since its Attempt (maxKeys): count
		// it afresh so that it is logged.
		s = &strikes{failures: 1, last: now}
		b.keys[k] = s
	}
	f := Failure{InARow: s.failures}
	if now.Before(s.until) {
		f.Delay = delay(s.failures)
	}
	if s.logged.IsZero() || now.Sub(s.logged) >= LogEvery {
		f.Log, f.Unlogged = true, s.unlogged
		s.logged, s.unlogged = now, 0
	} else {
		s.unlogged++
	}
	return f
}

// Succeed forgets k's failures: it proved it knows the password.
func (b *Backoff) Succeed(k Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.keys, k)
}

// forgetLocked drops keys quiet for BackoffForget, then, if the map is
// still full, any that serve no wait now.
func (b *Backoff) forgetLocked(now time.Time) {
	for k, s := range b.keys {
		if now.Sub(s.last) >= BackoffForget {
			delete(b.keys, k)
		}
	}
	for k, s := range b.keys {
		if len(b.keys) < maxKeys {
			return
		}
		if !now.Before(s.until) {
			delete(b.keys, k)
		}
	}
}
