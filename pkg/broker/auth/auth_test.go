package auth

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/streamcast/streamcast/pkg/broker/config"
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
	p := New(a, clock.Now)
	var n atomic.Int64
	p.compare = func(h, pw []byte) error {
		n.Add(1)
		return bcrypt.CompareHashAndPassword(h, pw)
	}
	return p, &n
}

const alicePW = "al1ce-Secret-pw"

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
			if who, err := p.Authenticate(ctx, "alice", alicePW); err != nil || who != "alice" {
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
		if _, err := p.Authenticate(ctx, "alice", alicePW); err != nil {
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
		if _, err := p.Authenticate(ctx, "alice", "wrong"); err != ErrBadCredentials {
			t.Fatalf("wrong password: %v, want ErrBadCredentials", err)
		}
	}
	if n := compares.Load(); n != 4 {
		t.Fatalf("3 wrong passwords: %d comparisons in all, want 4 (each wrong one checked)", n)
	}
	// An unknown user costs a comparison too (timing tells nothing).
	if _, err := p.Authenticate(ctx, "mallory", alicePW); err != ErrBadCredentials {
		t.Fatalf("unknown user: %v", err)
	}
	if n := compares.Load(); n != 5 {
		t.Fatalf("an unknown user ran %d comparisons in all, want 5", n)
	}
	// Past the TTL the pair is checked again.
	clock.Add(CacheTTL)
	if _, err := p.Authenticate(ctx, "alice", alicePW); err != nil {
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
		_, _ = p.Authenticate(ctx, "alice", pw)
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
	p := New(a, nil)
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

func TestBackoffSlowsAnAddressAfterItsFreeFailures(t *testing.T) {
	clock := newFakeClock()
	b := NewBackoff(clock.Now)
	const addr = "192.0.2.1"
	for i := 1; i <= FreeFailures; i++ {
		f := b.Fail(addr)
		if f.Delay != 0 || b.Wait(addr) != 0 {
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
		f := b.Fail(addr)
		if f.Log {
			accounted += 1 + f.Unlogged
		}
		if f.Delay != want {
			t.Fatalf("failure %d: delay %v, want %v", FreeFailures+1+i, f.Delay, want)
		}
		if w := b.Wait(addr); w != want {
			t.Fatalf("wait %v, want %v", w, want)
		}
		if b.Wait("192.0.2.2") != 0 {
			t.Fatal("another address waits too")
		}
		clock.Add(want)
		if w := b.Wait(addr); w != 0 {
			t.Fatalf("after the delay the address still waits %v", w)
		}
		want = min(2*want, BackoffMax)
	}
	// Once per LogEvery, with the count of the failures not logged.
	clock.Add(LogEvery)
	f := b.Fail(addr)
	if !f.Log {
		t.Fatalf("after the interval: %+v, want a line", f)
	}
	if accounted += 1 + f.Unlogged; accounted != FreeFailures+10+1 {
		t.Fatalf("log lines account for %d failures, want %d", accounted, FreeFailures+10+1)
	}
	// A success forgets the address; so does a long quiet.
	b.Succeed(addr)
	if f := b.Fail(addr); f.InARow != 1 || f.Delay != 0 {
		t.Fatalf("after a success: %+v, want a first failure", f)
	}
	for range FreeFailures + 3 {
		b.Fail(addr)
	}
	clock.Add(BackoffForget)
	if f := b.Fail(addr); f.InARow != 1 {
		t.Fatalf("after %v of quiet: %d failures in a row, want 1", BackoffForget, f.InARow)
	}
}
