package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"slices"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

// Principal names who a request is: a configured user's name, or
// config.PrincipalAnonymous for a request without credentials.
type Principal = string

// Anonymous is the principal of a request without credentials.
const Anonymous Principal = config.PrincipalAnonymous

// ErrBadCredentials is returned by Authenticate for an unknown user or a
// wrong password; it says no more, so a client learns nothing of which.
var ErrBadCredentials = errors.New("unknown user or wrong password")

// Policy is a compiled auth: section: the users and their hashes, the
// grants, and the cache of verified credentials. It is safe for concurrent
// use. A reload builds a new Policy; connections admitted under the old one
// keep what it gave them.
type Policy struct {
	users  map[string][]byte // name → bcrypt hash
	grants []config.Grant
	now    func() time.Time
	cache  *cache
	limit  *Limiter
	// decoy is what an unknown user's password is compared with (verify).
	decoy []byte
	// compare is bcrypt's comparison; tests count its calls.
	compare func(hash, password []byte) error
}

// CacheTTL is how long a verified user name and password are taken as
// good without running bcrypt again. Short, so a password changed in the
// config and reloaded stops working soon even if the same Policy served on.
const CacheTTL = time.Minute

// New compiles a validated auth: section (config.Auth.Validate). now is the
// clock of the cache (time.Now when nil); limit bounds the bcrypt
// comparisons running at once, shared by every Policy of a server so that
// a reload does not reset it (DefaultLimiter when nil).
func New(a *config.Auth, now func() time.Time, limit *Limiter) *Policy {
	if now == nil {
		now = time.Now
	}
	if limit == nil {
		limit = DefaultLimiter()
	}
	p := &Policy{users: map[string][]byte{}, grants: slices.Clone(a.Grants), now: now, cache: newCache(), limit: limit, compare: bcrypt.CompareHashAndPassword}
	for _, u := range a.Users {
		p.users[u.Name] = []byte(u.PasswordHash)
	}
	// The decoy is made now, at the start or the reload, so that the
	// first unknown user does not pay for it: a burst of unknown names
	// would otherwise cost a bcrypt hash more than one of wrong passwords,
	// and the first such request would take twice as long as any other.
	p.decoy = makeDecoy(p.users)
	return p
}

// Authenticate checks a user name and password. It returns the user's
// principal, or ErrBadCredentials. A pair verified less than CacheTTL ago
// costs a keyed hash and a map lookup, and a pair another call is
// comparing now waits for that call's answer. Otherwise this call runs
// bcrypt: first admit is asked (the gate's backoff; its error is
// returned as it is), then a slot of the limiter is taken (ErrBusy when
// there is none). ctx bounds the waits, not a comparison that started.
func (p *Policy) Authenticate(ctx context.Context, user, password string, admit func() error) (Principal, error) {
	k := p.cache.key(user, password)
	for {
		ok, found, wait := p.cache.lookup(k, p.now(), true)
		switch {
		case found:
			return p.result(user, ok)
		case wait != nil:
			select {
			case <-wait.done:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			if wait.abandoned {
				continue // its caller was refused before bcrypt; try ours
			}
			return p.result(user, wait.ok)
		}
		// This call claimed the comparison; others with the same pair
		// wait for it.
		if err := admit(); err != nil {
			p.cache.abandon(k)
			return "", err
		}
		release, err := p.limit.Acquire(ctx)
		if err != nil {
			p.cache.abandon(k)
			return "", err
		}
		ok = p.verify(user, password)
		release()
		p.cache.finish(k, ok, p.now().Add(CacheTTL))
		return p.result(user, ok)
	}
}

// Cached reports whether user and password were verified less than
// CacheTTL ago: what a request from an address in backoff may still use.
func (p *Policy) Cached(user, password string) bool {
	ok, found, _ := p.cache.lookup(p.cache.key(user, password), p.now(), false)
	return found && ok
}

func (p *Policy) result(user string, ok bool) (Principal, error) {
	if !ok {
		return "", ErrBadCredentials
	}
	return user, nil
}

// verify runs bcrypt. An unknown user costs a comparison too, against a
// hash of the same cost, so timing does not tell which user names exist.
func (p *Policy) verify(user, password string) bool {
	h, ok := p.users[user]
	if !ok {
		_ = p.compare(p.decoy, []byte(password))
		return false
	}
	return p.compare(h, []byte(password)) == nil
}

// makeDecoy returns a hash of a random password at the highest cost of
// the users' hashes.
func makeDecoy(users map[string][]byte) []byte {
	cost := bcrypt.MinCost
	for _, h := range users {
		if c, err := bcrypt.Cost(h); err == nil && c > cost {
			cost = c
		}
	}
	var pw [16]byte
	_, _ = rand.Read(pw[:])
	h, _ := bcrypt.GenerateFromPassword(pw[:], cost)
	return h
}

// IsUser reports whether name is a configured user (for log lines, which
// name only users that exist, never what a client typed).
func (p *Policy) IsUser(name string) bool {
	_, ok := p.users[name]
	return ok
}

// Allows reports whether who holds action (config.ActionRead, …) on the
// stream named stream.
func (p *Policy) Allows(who Principal, action, stream string) bool {
	return p.holds(who, action, func(pattern string) bool { return config.MatchStream(pattern, stream) })
}

// AllowsEverywhere reports whether who holds action on "*": a grant
// whose streams list "*" itself, not a set of prefixes that happens to
// cover every stream served. Process-wide figures (/stats's process and
// children, /metrics) need stats on "*".
func (p *Policy) AllowsEverywhere(who Principal, action string) bool {
	return p.holds(who, action, func(pattern string) bool { return pattern == "*" })
}

// AllowsAny reports whether who holds action on at least one stream
// pattern: whether /stats has anything to show them.
func (p *Policy) AllowsAny(who Principal, action string) bool {
	return p.holds(who, action, func(string) bool { return true })
}

// Filter returns the names, in order, on which who holds action.
func (p *Policy) Filter(who Principal, action string, names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if p.Allows(who, action, n) {
			out = append(out, n)
		}
	}
	return out
}

func (p *Policy) holds(who Principal, action string, stream func(pattern string) bool) bool {
	for _, g := range p.grants {
		if slices.Contains(g.Actions, action) && covers(g.Principals, who) && slices.ContainsFunc(g.Streams, stream) {
			return true
		}
	}
	return false
}

// covers reports whether a grant's principals include who: by name, by
// "*" for any user, and by "anonymous" for everyone, since credentials
// must never take access away.
func covers(principals []string, who Principal) bool {
	for _, p := range principals {
		switch {
		case p == who, p == config.PrincipalAnonymous:
			return true
		case p == config.PrincipalAnyUser && who != Anonymous:
			return true
		}
	}
	return false
}

// cacheMax bounds the entries of the verification cache; past it, expired
// entries go first, then arbitrary ones.
const cacheMax = 10000

// cache remembers verified pairs by a keyed hash (HMAC-SHA256 under a key
// drawn at start), so neither a password nor an unsalted hash of one is
// ever held. Only successes are kept.
type cache struct {
	hkey [32]byte

	mu      sync.Mutex
	good    map[[32]byte]time.Time // key → expiry
	pending map[[32]byte]*call     // bcrypt running for this key
}

// call is one bcrypt comparison others wait for. abandoned says its
// caller was refused before it ran bcrypt: a waiter then claims its own.
type call struct {
	done      chan struct{}
	ok        bool
	abandoned bool
}

func newCache() *cache {
	c := &cache{good: map[[32]byte]time.Time{}, pending: map[[32]byte]*call{}}
	_, _ = rand.Read(c.hkey[:])
	return c
}

func (c *cache) key(user, password string) [32]byte {
	m := hmac.New(sha256.New, c.hkey[:])
	m.Write([]byte(user))
	m.Write([]byte{0})
	m.Write([]byte(password))
	var k [32]byte
	m.Sum(k[:0])
	return k
}

// lookup returns a live entry (found), or a comparison in flight to wait
// for, or neither. With claim, neither means the caller now runs the
// comparison and must call finish.
func (c *cache) lookup(k [32]byte, now time.Time, claim bool) (ok, found bool, wait *call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if exp, hit := c.good[k]; hit {
		if now.Before(exp) {
			return true, true, nil
		}
		delete(c.good, k)
	}
	if w := c.pending[k]; w != nil || !claim {
		return false, false, w
	}
	c.pending[k] = &call{done: make(chan struct{})}
	return false, false, nil
}

// finish records the comparison's result and wakes its waiters.
func (c *cache) finish(k [32]byte, ok bool, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.pending[k]
	delete(c.pending, k)
	if ok {
		if len(c.good) >= cacheMax {
			c.evictLocked(expires.Add(-CacheTTL))
		}
		c.good[k] = expires
	}
	if w != nil {
		w.ok = ok
		close(w.done)
	}
}

// abandon releases a claim that ran no comparison and wakes its waiters
// to try for themselves.
func (c *cache) abandon(k [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.pending[k]; w != nil {
		delete(c.pending, k)
		w.abandoned = true
		close(w.done)
	}
}

// evictLocked drops expired entries, then, while still full, any.
func (c *cache) evictLocked(now time.Time) {
	for k, exp := range c.good {
		if !now.Before(exp) {
			delete(c.good, k)
		}
	}
	for k := range c.good {
		if len(c.good) < cacheMax {
			break
		}
		delete(c.good, k)
	}
}
