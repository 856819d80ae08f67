package auth

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

// hash is a bcrypt hash at the lowest cost, so tests stay quick.
func hash(t testing.TB, pw string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// countingPolicy is a policy over alice (password alicePW) whose bcrypt
// comparisons are counted.
func countingPolicy(t *testing.T, clock *fakeClock) (*Policy, *atomic.Int64) {
	a := &config.Auth{
		Users:  []config.User{{Name: "alice", PasswordHash: hash(t, alicePW)}},
		Grants: []config.Grant{{Principals: []string{"alice"}, Actions: []string{"read"}, Streams: []string{"trades"}}},
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	p := New(a, clock.Now, nil)
	var n atomic.Int64
	p.compare = func(h, pw []byte) error {
		n.Add(1)
		return bcrypt.CompareHashAndPassword(h, pw)
	}
	return p, &n
}

const alicePW = "al1ce-Secret-pw"

// admitAll is an admission that refuses no comparison.
func admitAll() error { return nil }

func TestVerifiedCredentialsAreCachedAndCostOneBcrypt(t *testing.T) {
	clock := newFakeClock()
	p, compares := countingPolicy(t, clock)
	ctx := context.Background()

	// A thousand connections with the same good pair, all at once, cost
	// one comparison: the first runs it and the others wait for it.
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if who, err := p.Authenticate(ctx, "alice", alicePW, admitAll); err != nil || who != "alice" {
				bad.Add(1)
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d of 1000 authentications failed", bad.Load())
	}
	if n := compares.Load(); n != 1 {
		t.Fatalf("1000 concurrent logins with one pair ran bcrypt %d times, want 1", n)
	}
	// Later ones within the TTL too.
	for range 100 {
		if _, err := p.Authenticate(ctx, "alice", alicePW, admitAll); err != nil {
			t.Fatal(err)
		}
	}
	if n := compares.Load(); n != 1 {
		t.Fatalf("cached logins ran bcrypt: %d comparisons, want 1", n)
	}
	if !p.Cached("alice", alicePW) || p.Cached("alice", alicePW+"x") {
		t.Fatal("Cached disagrees with what was verified")
	}
	// A wrong password is never cached, and never passes.
	for range 3 {
		if _, err := p.Authenticate(ctx, "alice", "wrong", admitAll); err != ErrBadCredentials {
			t.Fatalf("wrong password: %v, want ErrBadCredentials", err)
		}
	}
	if n := compares.Load(); n != 4 {
		t.Fatalf("3 wrong passwords: %d comparisons in all, want 4 (each wrong one checked)", n)
	}
	// An unknown user costs a comparison too (timing tells nothing).
	if _, err := p.Authenticate(ctx, "mallory", alicePW, admitAll); err != ErrBadCredentials {
		t.Fatalf("unknown user: %v", err)
	}
	if n := compares.Load(); n != 5 {
		t.Fatalf("an unknown user ran %d comparisons in all, want 5", n)
	}
	// Past the TTL the pair is checked again.
	clock.Add(CacheTTL)
	if _, err := p.Authenticate(ctx, "alice", alicePW, admitAll); err != nil {
		t.Fatal(err)
	}
	if n := compares.Load(); n != 6 {
		t.Fatalf("after the TTL: %d comparisons, want 6", n)
	}
}

// TestTheCacheNeverHoldsAPassword looks at everything the cache holds
// after logins and finds no password, plain or base64, in it.
func TestTheCacheNeverHoldsAPassword(t *testing.T) {
	p, _ := countingPolicy(t, newFakeClock())
	ctx := context.Background()
	pws := []string{alicePW, "another-Wrong-pw", "third-Wrong-pw"}
	for _, pw := range pws {
		_, _ = p.Authenticate(ctx, "alice", pw, admitAll)
	}
	if len(p.cache.good) != 1 {
		t.Fatalf("cache holds %d entries, want 1 (only the good pair)", len(p.cache.good))
	}
	var dump bytes.Buffer
	p.cache.mu.Lock()
	for k, v := range p.cache.good {
		dump.Write(k[:])
		fmt.Fprintf(&dump, "%#v %v", k, v)
	}
	for k, v := range p.cache.pending {
		dump.Write(k[:])
		fmt.Fprintf(&dump, "%#v %#v", k, v)
	}
	p.cache.mu.Unlock()
	for _, pw := range pws {
		for _, form := range []string{pw, base64.StdEncoding.EncodeToString([]byte("alice:" + pw)), pw[:8]} {
			if bytes.Contains(dump.Bytes(), []byte(form)) {
				t.Fatalf("the cache holds %q", form)
			}
		}
	}
}

func TestGrantsCoverPrincipalsActionsAndStreams(t *testing.T) {
	a := &config.Auth{
		Users: []config.User{{Name: "alice", PasswordHash: hash(t, "a")}, {Name: "bob", PasswordHash: hash(t, "b")}},
		Grants: []config.Grant{
			{Principals: []string{"alice"}, Actions: []string{"read", "publish"}, Streams: []string{"trades", "fx.*"}},
			{Principals: []string{"*"}, Actions: []string{"stats"}, Streams: []string{"trades"}},
			{Principals: []string{"anonymous"}, Actions: []string{"read"}, Streams: []string{"public"}},
			{Principals: []string{"bob"}, Actions: []string{"stats"}, Streams: []string{"*"}},
		},
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	p := New(a, nil, nil)
	cases := []struct {
		who, action, stream string
		want                bool
	}{
		{"alice", "read", "trades", true},
		{"alice", "publish", "trades", true},
		{"alice", "read", "fx.eur", true},
		{"alice", "read", "fx", false}, // the prefix is "fx."
		{"alice", "read", "tradesx", false},
		{"alice", "stats", "trades", true}, // through "*"
		{"alice", "stats", "fx.eur", false},
		{"bob", "read", "trades", false},
		{"bob", "stats", "anything", true},
		{"bob", "read", "public", true}, // anonymous's grant is everyone's
		{Anonymous, "read", "public", true},
		{Anonymous, "stats", "trades", false}, // "*" is authenticated users only
		{Anonymous, "publish", "public", false},
	}
	for _, c := range cases {
		if got := p.Allows(c.who, c.action, c.stream); got != c.want {
			t.Errorf("Allows(%s, %s, %s) = %v, want %v", c.who, c.action, c.stream, got, c.want)
		}
	}
	if !p.AllowsEverywhere("bob", "stats") || p.AllowsEverywhere("alice", "stats") {
		t.Error("stats on * belongs to bob only")
	}
	if got := p.Filter("alice", "read", []string{"fx.a", "public", "secret", "trades"}); strings.Join(got, ",") != "fx.a,public,trades" {
		t.Errorf("alice's readable streams: %v", got)
	}
}

func TestBackoffSlowsALoginAfterItsFreeFailures(t *testing.T) {
	clock := newFakeClock()
	b := NewBackoff(clock.Now)
	k := Key{Addr: "192.0.2.1", User: "alice"}
	fail := func() Failure {
		t.Helper()
		if w := b.Attempt(k); w != 0 {
			t.Fatalf("attempt refused with a wait of %v", w)
		}
		return b.Failed(k)
	}
	for i := 1; i <= FreeFailures; i++ {
		f := fail()
		if f.Delay != 0 || b.Wait(k) != 0 {
			t.Fatalf("failure %d of %d free ones imposed a wait of %v", i, FreeFailures, f.Delay)
		}
		if f.Log != (i == 1) {
			t.Fatalf("failure %d: log=%v; only the first of the interval is logged", i, f.Log)
		}
	}
	// Every failure is either logged or counted in the next line.
	accounted := 1 // the first line
	want := BackoffBase
	for i := 0; i < 10; i++ {
		f := fail()
		if f.Log {
			accounted += 1 + f.Unlogged
		}
		if f.Delay != want {
			t.Fatalf("failure %d: delay %v, want %v", FreeFailures+1+i, f.Delay, want)
		}
		if w := b.Attempt(k); w != want {
			t.Fatalf("an attempt during the wait: %v, want a wait of %v", w, want)
		}
		for _, other := range []Key{{Addr: "192.0.2.2", User: "alice"}, {Addr: k.Addr, User: "bob"}} {
			if b.Wait(other) != 0 {
				t.Fatalf("%+v waits too", other)
			}
		}
		clock.Add(want)
		if w := b.Wait(k); w != 0 {
			t.Fatalf("after the delay the login still waits %v", w)
		}
		want = min(2*want, BackoffMax)
	}
	// Once per LogEvery, with the count of the failures not logged.
	clock.Add(LogEvery)
	f := fail()
	if !f.Log {
		t.Fatalf("after the interval: %+v, want a line", f)
	}
	if accounted += 1 + f.Unlogged; accounted != FreeFailures+10+1 {
		t.Fatalf("log lines account for %d failures, want %d", accounted, FreeFailures+10+1)
	}
	// A success forgets the login; so does a long quiet.
	b.Succeed(k)
	if f := fail(); f.InARow != 1 || f.Delay != 0 {
		t.Fatalf("after a success: %+v, want a first failure", f)
	}
	for range FreeFailures - 1 {
		fail()
	}
	clock.Add(BackoffForget)
	if f := fail(); f.InARow != 1 {
		t.Fatalf("after %v of quiet: %d failures in a row, want 1", BackoffForget, f.InARow)
	}
}

// TestConcurrentBadLoginsRunNoMoreBcryptThanSequentialOnes sends 150
// wrong passwords for one user from one address at once, as the gate
// does: an attempt counts as it starts, so no more comparisons run than
// the free ones and the one that starts the wait, and the rest are
// refused without bcrypt.
func TestConcurrentBadLoginsRunNoMoreBcryptThanSequentialOnes(t *testing.T) {
	clock := newFakeClock()
	p, compares := countingPolicy(t, clock)
	b := NewBackoff(clock.Now)
	k := LoginKey("192.0.2.1", "alice", p)
	var wg sync.WaitGroup
	var refused, bad atomic.Int64
	start := make(chan struct{})
	for i := range 150 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := p.Authenticate(context.Background(), "alice", fmt.Sprintf("guess-%d", i), func() error {
				if b.Attempt(k) > 0 {
					return errors.New("backoff")
				}
				return nil
			})
			switch {
			case errors.Is(err, ErrBadCredentials):
				bad.Add(1)
			case err != nil:
				refused.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if n := compares.Load(); n > FreeFailures+1 {
		t.Errorf("150 concurrent wrong passwords ran bcrypt %d times, want at most %d", n, FreeFailures+1)
	}
	if bad.Load()+refused.Load() != 150 || bad.Load() != compares.Load() {
		t.Errorf("%d refused as bad, %d refused unchecked, %d comparisons; want every bad answer to be a comparison", bad.Load(), refused.Load(), compares.Load())
	}
	// Unknown user names share one key per address.
	if LoginKey("192.0.2.1", "mallory", p) != LoginKey("192.0.2.1", "eve", p) || LoginKey("192.0.2.1", "alice", p) == LoginKey("192.0.2.1", "eve", p) {
		t.Error("unknown user names must share one key, apart from alice's")
	}
}

// TestTheLimiterRefusesBeyondItsQueueAtOnce holds every slot and fills
// the queue: the next Acquire fails at once with ErrBusy, and a queued one
// gets a slot when one is released.
func TestTheLimiterRefusesBeyondItsQueueAtOnce(t *testing.T) {
	l := NewLimiter(1, 1, time.Hour)
	ctx := context.Background()
	release, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan error, 1)
	go func() {
		r, err := l.Acquire(ctx)
		if err == nil {
			r()
		}
		queued <- err
	}()
	// Wait until the second Acquire occupies the queue's one place.
	for len(l.queue) == 0 {
		runtime.Gosched()
	}
	if _, err := l.Acquire(ctx); !errors.Is(err, ErrBusy) {
		t.Fatalf("with the slot and the queue full: %v, want ErrBusy at once", err)
	}
	release()
	if err := <-queued; err != nil {
		t.Fatalf("the queued Acquire after a release: %v", err)
	}
	short := NewLimiter(1, 1, time.Millisecond)
	r, _ := short.Acquire(ctx)
	if _, err := short.Acquire(ctx); !errors.Is(err, ErrBusy) {
		t.Fatalf("past its wait: %v, want ErrBusy", err)
	}
	r()
}
