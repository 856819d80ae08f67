package logstore

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/streamcast/streamcast/internal/testkit"
)

// runRoles runs the given roles over dir in goroutines until the returned
// function is called (which waits for them).
func runRoles(t *testing.T, dir string, logs *testkit.SyncBuffer, roles ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range roles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logger := log.New(logs)
			logger.SetLevel(log.InfoLevel)
			// Every failure is logged: the test counts failed passes.
			err := runRole(ctx, r, []string{dir}, MaintainOptions{Every: 20 * time.Millisecond, FlushEvery: 100 * time.Millisecond,
				RepeatEvery: time.Nanosecond, Logger: logger})
			if err != nil {
				t.Errorf("runRole(%s): %v", r, err)
			}
		}()
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitPublished waits until the table holds everything appended so far.
func waitPublished(t *testing.T, l *Log, within time.Duration, logs *testkit.SyncBuffer) {
	t.Helper()
	ctx := context.Background()
	_, end, _ := l.Extent(ctx)
	deadline := time.Now().Add(within)
	for {
		through, err := l.PublishedThrough(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if through >= end-1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the table holds offsets through %d of %d after %s; role logs:\n%s", through, end-1, within, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPublishRetriesThroughS3FailuresAndCatchesUp stops the S3 server, and
// later gives the maintainers wrong credentials, while rows keep coming:
// publish logs each failed pass and retries, appends and local reads go
// on, nothing acknowledged is lost, and the table catches up once S3 is
// back.
func TestPublishRetriesThroughS3FailuresAndCatchesUp(t *testing.T) {
	ctx := context.Background()
	s := startS3(t)
	s.UseCredentials(t)
	cfg := s3LogConfig(s, "failures")
	cfg.StagingRetention = time.Hour // keep local copies: reads must not need S3 while it is down
	l := createLog(t, mustCompile(t, tradeSchema), cfg)
	s3Servers.Store(l.Dir(), s)
	defer s3Servers.Delete(l.Dir())
	exp := expectation{}
	logs := &testkit.SyncBuffer{}
	stop := runRoles(t, l.Dir(), logs, "seal", "publish", "clean", "clean-published")

	appendTrades(t, l, exp, 20, 10)
	waitPublished(t, l, 20*time.Second, logs)

	// 1. The server goes away.
	s.Stop()
	before, _ := l.PublishedThrough(ctx)
	for range 10 {
		appendTrades(t, l, exp, 5, 10)
		time.Sleep(50 * time.Millisecond)
	}
	// Each failed pass takes the SDK's retries: wait for two, however slow
	// the machine.
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(logs.String(), "pass failed") < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "pass failed"); n < 2 {
		t.Fatalf("with S3 down, publish logged %d failed passes in 30s; logs:\n%s", n, logs.String())
	}
	if through, _ := l.PublishedThrough(ctx); through != before {
		t.Fatalf("published_through moved from %d to %d with S3 down", before, through)
	}
	_, end, _ := l.Extent(ctx)
	if err := exp.check(scanAll(t, l, 1, end), 1, end); err != nil {
		t.Fatalf("reading the log with S3 down: %v", err)
	}
	s.Start()
	waitPublished(t, l, 30*time.Second, logs)
	checkTable(t, l, exp)

	// 2. Wrong credentials: new maintainers pick them up from the
	// environment, and publishing stops until they are right again.
	stop()
	secret := os.Getenv("AWS_SECRET_ACCESS_KEY")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	logs2 := &testkit.SyncBuffer{}
	stop = runRoles(t, l.Dir(), logs2, "seal", "publish", "clean")
	before, _ = l.PublishedThrough(ctx)
	for range 10 {
		appendTrades(t, l, exp, 5, 10)
		time.Sleep(50 * time.Millisecond)
	}
	deadline = time.Now().Add(30 * time.Second)
	for strings.Count(logs2.String(), "pass failed") < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(logs2.String(), "pass failed"); n < 2 {
		t.Fatalf("with wrong credentials, publish logged %d failed passes in 30s; logs:\n%s", n, logs2.String())
	}
	if strings.Contains(logs2.String(), "not-the-secret") || strings.Contains(logs.String(), secret) {
		t.Fatal("a secret access key appears in the logs")
	}
	if through, _ := l.PublishedThrough(ctx); through != before {
		t.Fatalf("published_through moved from %d to %d with wrong credentials", before, through)
	}
	os.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	waitPublished(t, l, 30*time.Second, logs2)
	stop()
	_, end, _ = l.Extent(ctx)
	if err := exp.check(scanAll(t, l, 1, end), 1, end); err != nil {
		t.Fatal(err)
	}
	checkTable(t, l, exp)
	// Nothing the failed passes uploaded is left once the queue drains.
	for range 2 {
		if _, err := l.CleanPublished(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := l.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	checkNoOrphans(t, l)
}
