package ndjson

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/wire"
)

// s3Cursor starts versitygw with the AWS environment pointing at it and
// returns it with the URI of a cursor object in its bucket.
func s3Cursor(t *testing.T) (*testkit.S3Server, string) {
	t.Helper()
	srv := testkit.StartS3(t, nil)
	srv.UseCredentials(t)
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint())
	return srv, "s3://" + testkit.Bucket + "/consumer1/trades.offset"
}

func getObject(t *testing.T, srv *testkit.S3Server, key string) string {
	t.Helper()
	out, err := srv.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(testkit.Bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer out.Body.Close()
	b, _ := io.ReadAll(out.Body)
	return strings.TrimSpace(string(b))
}

func publishTrades(t *testing.T, base string, n int) {
	t.Helper()
	p, err := wire.Publish(ctxT(t), base+"/trades", wire.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range n {
		if _, err := p.Send(ctxT(t), trade(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// logRecorder is a Logger that keeps what it heard.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) Info(msg any, kv ...any) { l.add(msg) }
func (l *logRecorder) Warn(msg any, kv ...any) { l.add(msg) }
func (l *logRecorder) add(msg any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, msg.(string))
}
func (l *logRecorder) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestRemoteCursorResumesATailOnAnotherMachine tails with the cursor only
// in the bucket, then starts a second tail with nothing local: it resumes
// one above the uploaded offset, and writes that offset down locally.
func TestRemoteCursorResumesATailOnAnotherMachine(t *testing.T) {
	srv, uri := s3Cursor(t)
	base := serve(t, nil)
	publishTrades(t, base, 5)

	first := MemoryCursor(uri)
	rc, err := OpenRemoteCursor(ctxT(t), uri, first, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc.Start(time.Hour) // only the final upload on Close
	var out bytes.Buffer
	if _, err := Tail(ctxT(t), base+"/trades", &out, tailDefaults(TailOptions{Offset: wire.At(0), Count: 3, Cursor: first})); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if got := getObject(t, srv, "consumer1/trades.offset"); got != "3" {
		t.Fatalf("the object holds %q after a tail that ended at offset 3, want 3", got)
	}

	// Another machine: an empty directory, the same object.
	path := filepath.Join(t.TempDir(), "trades.cursor")
	second, _, err := OpenCursor(path)
	if err != nil {
		t.Fatal(err)
	}
	rc2, err := OpenRemoteCursor(ctxT(t), uri, second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rc2.Close()
	if second.Resume() != 4 {
		t.Fatalf("a new machine resumes at %d, want 4 (one above the bucket's 3)", second.Resume())
	}
	if got := readCursorFile(t, path); got != "3" {
		t.Errorf("the local file holds %q after adopting the bucket's cursor, want 3", got)
	}
	out.Reset()
	if _, err := Tail(ctxT(t), base+"/trades", &out, tailDefaults(TailOptions{UntilCaughtUp: true, Cursor: second})); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(out.String(), "\n"); lines != 2 || !strings.HasPrefix(out.String(), "[4,") {
		t.Errorf("the resumed tail printed %d lines starting %.10q, want offsets 4 and 5", lines, out.String())
	}
}

// TestRemoteCursorLosesToALocalFile keeps the object at 9 and the file at
// 4: the file decides (the object may lag, or belong to a run elsewhere),
// and a clean exit puts the file's position in the object.
func TestRemoteCursorLosesToALocalFile(t *testing.T) {
	srv, uri := s3Cursor(t)
	_, err := srv.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(testkit.Bucket), Key: aws.String("consumer1/trades.offset"), Body: strings.NewReader("9\n")})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "c")
	if err := writeFileAtomic(path, []byte("4")); err != nil {
		t.Fatal(err)
	}
	c, _, _ := OpenCursor(path)
	rc, err := OpenRemoteCursor(ctxT(t), uri, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if c.Resume() != 5 {
		t.Errorf("resume at %d with file 4 and object 9, want 5 (the file wins)", c.Resume())
	}
	if got := getObject(t, srv, "consumer1/trades.offset"); got != "4" {
		t.Errorf("the object holds %q after a clean exit at 4, want 4", got)
	}
}

// TestRemoteCursorOutageNeverStopsTheTail takes the bucket away while a
// tail uploads every few milliseconds: the tail goes on to its end, the
// failure is logged once, and the next upload after the outage lands.
func TestRemoteCursorOutageNeverStopsTheTail(t *testing.T) {
	srv, uri := s3Cursor(t)
	base := serve(t, nil)
	publishTrades(t, base, 4)
	log := &logRecorder{}
	c := MemoryCursor(uri)
	rc, err := OpenRemoteCursor(ctxT(t), uri, c, log)
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	rc.Start(5 * time.Millisecond)
	var out bytes.Buffer
	if _, err := Tail(ctxT(t), base+"/trades", &out, tailDefaults(TailOptions{Offset: wire.At(0), UntilCaughtUp: true, Cursor: c})); err != nil {
		t.Fatalf("the tail failed while the bucket was away: %v", err)
	}
	waitUntil(t, "three failed uploads", func() bool { return rc.tried() >= 3 })
	srv.Start()
	rc.Close()
	if n := strings.Count(log.text(), "cursor upload failed"); n != 1 {
		t.Errorf("the outage was logged %d times, want once:\n%s", n, log.text())
	}
	if got := getObject(t, srv, "consumer1/trades.offset"); got != "4" {
		t.Errorf("the object holds %q after the outage ended, want 4", got)
	}
}

func TestParseS3URIRefusesWhatIsNotAnObject(t *testing.T) {
	for _, uri := range []string{"file:///x", "s3://bucket", "s3://bucket/", "s3://bucket/prefix/", "s3:///key"} {
		if _, _, err := ParseS3URI(uri); err == nil {
			t.Errorf("ParseS3URI(%q) accepted it", uri)
		}
	}
	if b, k, err := ParseS3URI("s3://b/a/c.offset"); err != nil || b != "b" || k != "a/c.offset" {
		t.Errorf("ParseS3URI = %q %q %v", b, k, err)
	}
}
