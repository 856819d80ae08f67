package ratelog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func lines(b *bytes.Buffer) []string {
	s := strings.TrimSpace(b.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestARepeatedFailureIsLoggedOncePerIntervalWithItsCount(t *testing.T) {
	var buf bytes.Buffer
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), 10*time.Second, clk.now)
	ctx := context.Background()

	for i := 0; i < 1000; i++ {
		l.Error(ctx, "commit", "commit failed", "err", "disk full")
	}
	if got := lines(&buf); len(got) != 1 || strings.Contains(got[0], "repeated") {
		t.Fatalf("1000 failures within the interval logged %d lines, want the first only: %q", len(got), got)
	}
	clk.t = clk.t.Add(10 * time.Second)
	l.Error(ctx, "commit", "commit failed", "err", "disk full")
	got := lines(&buf)
	if len(got) != 2 || !strings.Contains(got[1], "repeated=999") {
		t.Fatalf("after the interval want a second line with repeated=999, got %q", got)
	}

	// Another key is independent.
	l.Error(ctx, "seal", "seal failed")
	if got := lines(&buf); len(got) != 3 {
		t.Fatalf("a different failure was held back: %q", got)
	}

	l.Recovered(ctx, "commit", "commits succeed again")
	got = lines(&buf)
	if len(got) != 4 || !strings.Contains(got[3], "failures=1001") || !strings.Contains(got[3], "level=INFO") {
		t.Fatalf("recovery line = %q, want INFO with failures=1001", got[len(got)-1])
	}
	// After recovery the next failure is news again, logged at once.
	l.Error(ctx, "commit", "commit failed")
	if got := lines(&buf); len(got) != 5 || strings.Contains(got[4], "repeated") {
		t.Fatalf("a failure after recovery was not logged at once: %q", got)
	}
	// Recovering what never failed writes nothing.
	l.Recovered(ctx, "never", "fine")
	if got := lines(&buf); len(got) != 5 {
		t.Fatalf("a recovery without a failure logged: %q", got)
	}
}
