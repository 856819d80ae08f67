package ndjson

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/streamcast/streamcast/pkg/wire"
)

// DefaultUploadEvery is how often a RemoteCursor uploads a moved cursor.
const DefaultUploadEvery = 30 * time.Second

// remoteTimeout bounds one GET or PUT of the cursor object, so an
// unreachable bucket delays a start or an exit by at most this much.
const remoteTimeout = 10 * time.Second

// RemoteCursor keeps a copy of a Cursor in an S3 object, so a consumer
// whose machine is gone can resume on another one. It is a recovery hint,
// never a dependency of the tail: failures to reach the bucket are logged
// and never returned once the cursor is open, and the local file, when
// there is one, wins over the object.
//
// Credentials and region come from the standard AWS environment (variables,
// shared config, instance roles), never from a flag; an S3-compatible
// server is reached through AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or
// AWS_S3_ENDPOINT, with path-style addressing.
type RemoteCursor struct {
	uri         string
	bucket, key string
	client      *s3.Client
	cursor      *Cursor
	log         Logger

	mu       sync.Mutex // serializes uploads and guards the fields below
	uploaded int64      // the offset the object holds as far as we know; wire.Null
	failing  bool       // the last upload failed: log the next success
	attempts int        // uploads tried (tests wait on it)

	stop chan struct{}
	done chan struct{}
}

// ParseS3URI splits s3://bucket/key. A URI that is not s3://, lacks a key,
// or ends in / (a prefix, not an object) is refused.
func ParseS3URI(uri string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		return "", "", fmt.Errorf("cursor %q is not an s3:// URI; give s3://bucket/key, or a local file path", uri)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	switch {
	case bucket == "" || key == "":
		return "", "", fmt.Errorf("cursor %q names no object; give s3://bucket/key", uri)
	case strings.HasSuffix(key, "/"):
		return "", "", fmt.Errorf("cursor %q ends in /, a prefix; name the object itself, e.g. %sstream.offset", uri, uri)
	}
	return bucket, key, nil
}

// IsS3URI reports whether s names an S3 object rather than a local file.
func IsS3URI(s string) bool { return strings.HasPrefix(s, "s3://") }

// OpenRemoteCursor connects local to the object at uri. When local holds no
// position, the object's is read and adopted (and written to local's file,
// so a second restart needs no bucket); an unreachable bucket or a missing
// or garbled object leaves local as it is, with a warning. An error is
// returned only for a uri that is not an S3 object or an AWS environment
// that cannot be loaded: a configuration mistake, which must not pass for
// a cursor being shipped.
func OpenRemoteCursor(ctx context.Context, uri string, local *Cursor, log Logger) (*RemoteCursor, error) {
	bucket, key, err := ParseS3URI(uri)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = nopLogger{}
	}
	client, err := newS3Client(ctx)
	if err != nil {
		return nil, fmt.Errorf("cursor %s: load the AWS configuration from the environment: %w", uri, err)
	}
	r := &RemoteCursor{uri: uri, bucket: bucket, key: key, client: client, cursor: local, log: log, uploaded: wire.Null}
	if local.Loaded() != wire.Null {
		return r, nil // the local cursor wins
	}
	n, err := r.get(ctx)
	switch {
	case errors.Is(err, errNoObject):
		return r, nil
	case err != nil:
		log.Warn("cursor object cannot be read; starting as if it were absent", "cursor", uri, "err", err)
		return r, nil
	}
	r.uploaded = n
	local.Advance(n)
	if err := local.Save(true); err != nil {
		log.Warn("cursor read from the bucket cannot be written locally", "cursor", uri, "err", err)
	}
	log.Info("resuming from the cursor in the bucket", "cursor", uri, "offset", n)
	return r, nil
}

// newS3Client builds a client from the standard AWS environment, pointing
// at an S3-compatible endpoint when one is set there.
func newS3Client(ctx context.Context) (*s3.Client, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	endpoint := ""
	for _, v := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_S3_ENDPOINT"} {
		if endpoint = os.Getenv(v); endpoint != "" {
			break
		}
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // S3-compatible servers ignore it; AWS redirects
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
	}), nil
}

var errNoObject = errors.New("no cursor object")

// get reads the object's offset: errNoObject when it does not exist, an
// error when it cannot be read or does not hold an offset.
func (r *RemoteCursor) get(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	out, err := r.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.bucket), Key: aws.String(r.key)})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && (ae.ErrorCode() == "NoSuchKey" || ae.ErrorCode() == "NotFound") {
			return 0, errNoObject
		}
		return 0, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, 4096))
	if err != nil {
		return 0, err
	}
	// The object holds an offset alone; a local cursor file copied there
	// by hand reads too, without its output's mark, which describes a
	// file on another machine.
	text := bytes.TrimSpace(b)
	n, _, ok := parseCursor(text)
	if !ok || n == wire.Null {
		return 0, fmt.Errorf("the object holds %.30q, not an offset", text)
	}
	return n, nil
}

// Start uploads the cursor every interval while it moves, until Close.
func (r *RemoteCursor) Start(every time.Duration) {
	if every <= 0 {
		every = DefaultUploadEvery
	}
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(r.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				r.Upload(context.Background())
			}
		}
	}()
}

// Upload puts the cursor's position in the object when it moved since the
// last upload. A failure is logged (once per run of failures) and
// otherwise ignored.
func (r *RemoteCursor) Upload(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.cursor.Last()
	if last == wire.Null || last == r.uploaded {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	body := strconv.AppendInt(nil, last, 10)
	r.attempts++
	// One attempt: the next tick is the retry, and an outage must not
	// hold the final upload of a clean exit through the SDK's backoff.
	_, err := r.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(r.bucket), Key: aws.String(r.key),
		Body: bytes.NewReader(append(body, '\n')), ContentLength: aws.Int64(int64(len(body) + 1)),
	}, func(o *s3.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		if !r.failing {
			r.log.Warn("cursor upload failed; the tail goes on and retries at the next upload", "cursor", r.uri, "offset", last, "err", err)
		}
		r.failing = true
		return
	}
	if r.failing {
		r.log.Info("cursor upload works again", "cursor", r.uri, "offset", last)
	}
	r.failing = false
	r.uploaded = last
}

func (r *RemoteCursor) tried() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts
}

// Close stops the periodic upload and uploads once more (a clean exit).
func (r *RemoteCursor) Close() {
	if r.stop != nil {
		close(r.stop)
		<-r.done
		r.stop = nil
	}
	r.Upload(context.Background())
}
