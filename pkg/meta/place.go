package meta

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/streamcast/streamcast/internal/durable"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// place is one of the two places a stream's metadata lives: its home
// <root>/<stream>/ or <prefix>/<stream>/ beside its published tables.
// Names are relative to that directory, with '/' separators.
type place interface {
	// uri returns the URI of name in the place (file://… or s3://…).
	uri(name string) string
	// get reads name; an error wrapping fs.ErrNotExist when it is absent
	// (a missing bucket or directory included).
	get(ctx context.Context, name string) ([]byte, error)
	// create writes name only if nothing is there (compare-and-swap
	// against "absent"); errExists when something is.
	create(ctx context.Context, name string, data []byte) error
	// put replaces name as a whole, durably.
	put(ctx context.Context, name string, data []byte) error
	// putHint replaces name as a whole, its bytes durable but the new
	// name not yet: a crash may bring back the name's previous file
	// until the place's next durable change in the same directory. Only
	// for the version hint, which readers probe past (Store.read) and
	// which the next version's create makes durable.
	putHint(ctx context.Context, name string, data []byte) error
	// remove deletes name; absent is no error.
	remove(ctx context.Context, name string) error
	// list returns the entries one level under the place, directories
	// (or common prefixes) with a trailing '/'; nothing when the place or
	// its bucket is missing.
	list(ctx context.Context) ([]string, error)
}

// errExists is create's answer when the name is taken.
var errExists = errors.New("already exists")

// dirPlace is a place on the local file system.
type dirPlace struct {
	dir   string
	lists *atomic.Int64 // counts list calls (tests: an existing home never lists)
	syncs *atomic.Int64 // counts directory fsyncs (tests: what a commit costs the disk)
}

func (p dirPlace) path(name string) string { return filepath.Join(p.dir, filepath.FromSlash(name)) }

func (p dirPlace) uri(name string) string {
	abs, err := filepath.Abs(p.path(name))
	if err != nil {
		abs = p.path(name)
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
}

func (p dirPlace) get(_ context.Context, name string) ([]byte, error) {
	b, err := os.ReadFile(p.path(name))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDirectory) {
		return nil, fmt.Errorf("%s: %w", p.path(name), fs.ErrNotExist)
	}
	return b, err
}

// errNotDirectory is what reading under a path with a file where a
// directory should be fails with: it reads as nothing there.
const errNotDirectory = syscall.ENOTDIR

// tempFile writes data to a fresh file beside path and fdatasyncs it:
// its bytes and its size are all that must survive a crash, since its name
// is only linked or renamed into place after, and made durable by the
// directory's fsync. Its timestamps need not be, and skipping them spares
// a journal commit of the inode's times that other streams' commits queue
// behind.
func tempFile(path string, data []byte) (string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	var tok [6]byte
	_, _ = rand.Read(tok[:])
	tmp := path + ".tmp-" + hex.EncodeToString(tok[:])
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = durable.SyncData(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// create makes the version exclusively: a fsynced temporary file is hard
// linked to the name, which fails when the name exists, like O_EXCL, but
// never leaves a half-written version behind after a crash; the directory
// is fsynced so the new name survives one.
func (p dirPlace) create(_ context.Context, name string, data []byte) error {
	path := p.path(name)
	tmp, err := tempFile(path, data)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errExists
		}
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := os.Remove(tmp); err != nil {
		return fmt.Errorf("remove %s: %w", tmp, err)
	}
	return p.syncDir(path)
}

// put replaces name by renaming a fsynced temporary file over it, and
// fsyncs the directory so the rename survives a crash.
func (p dirPlace) put(ctx context.Context, name string, data []byte) error {
	if err := p.putHint(ctx, name, data); err != nil {
		return err
	}
	return p.syncDir(p.path(name))
}

// putHint renames a fsynced temporary file over name and leaves the
// directory unsynced: the hint sits beside the versions, and the next
// version's create fsyncs that directory (docs/design.md §4.7, the metadata
// store: the version file is the commit point, the hint only saves
// probes). A crash before then leaves the previous hint, whole, one
// version behind, and read probes forward past it. That is one fsync less
// per commit and place, each one a disk flush the neighbours' commits
// queue behind.
func (p dirPlace) putHint(_ context.Context, name string, data []byte) error {
	path := p.path(name)
	tmp, err := tempFile(path, data)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// syncDir fsyncs the directory holding path.
func (p dirPlace) syncDir(path string) error {
	if p.syncs != nil {
		p.syncs.Add(1)
	}
	return durable.SyncDir(filepath.Dir(path))
}

func (p dirPlace) remove(_ context.Context, name string) error {
	err := os.Remove(p.path(name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (p dirPlace) list(_ context.Context) ([]string, error) {
	if p.lists != nil {
		p.lists.Add(1)
	}
	entries, err := os.ReadDir(p.dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDirectory) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p.dir, err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		out = append(out, n)
	}
	return out, nil
}

// s3Place is a place under an s3:// prefix: bucket, and key prefix ending
// in '/'.
type s3Place struct {
	client *s3.Client
	bucket string
	prefix string
	lists  *atomic.Int64
}

// newS3Place returns the place of the objects under loc, an s3://
// location, reached with the endpoint and region of s3cfg.
func newS3Place(ctx context.Context, loc warehouse.Location, s3cfg warehouse.S3, lists *atomic.Int64) (s3Place, error) {
	bucket, prefix := loc.SplitS3()
	if prefix != "" {
		prefix += "/"
	}
	client, err := newS3Client(ctx, s3cfg)
	if err != nil {
		return s3Place{}, err
	}
	return s3Place{client: client, bucket: bucket, prefix: prefix, lists: lists}, nil
}

func (p s3Place) key(name string) string { return p.prefix + name }

func (p s3Place) uri(name string) string { return "s3://" + p.bucket + "/" + p.key(name) }

// apiCode returns the S3 error code of err ("" when it has none) and its
// HTTP status (0 when unknown), without naming the SDK's error types.
func apiCode(err error) (string, int) {
	var coded interface{ ErrorCode() string }
	var status interface{ HTTPStatusCode() int }
	code, st := "", 0
	if errors.As(err, &coded) {
		code = coded.ErrorCode()
	}
	if errors.As(err, &status) {
		st = status.HTTPStatusCode()
	}
	return code, st
}

// missing reports whether err says the object, or its bucket, is not
// there: both read as nothing there.
func missing(err error) bool {
	var nk *types.NoSuchKey
	var nb *types.NoSuchBucket
	var nf *types.NotFound
	if errors.As(err, &nk) || errors.As(err, &nb) || errors.As(err, &nf) {
		return true
	}
	code, st := apiCode(err)
	return code == "NoSuchKey" || code == "NoSuchBucket" || code == "NotFound" || st == 404
}

func (p s3Place) get(ctx context.Context, name string) ([]byte, error) {
	out, err := p.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(p.bucket), Key: aws.String(p.key(name))})
	if err != nil {
		if missing(err) {
			return nil, fmt.Errorf("%s: %w", p.uri(name), fs.ErrNotExist)
		}
		return nil, fmt.Errorf("read %s: %w", p.uri(name), err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p.uri(name), err)
	}
	return b, nil
}

// create is a conditional PUT (If-None-Match: *): the service refuses it
// with 412 when the key exists, and with 409 when another conditional
// write of the key is in flight; both mean another writer got there.
func (p s3Place) create(ctx context.Context, name string, data []byte) error {
	_, err := p.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(p.bucket), Key: aws.String(p.key(name)),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		ContentType: aws.String(contentType(name)),
		IfNoneMatch: aws.String("*"),
	})
	if err != nil {
		code, st := apiCode(err)
		if code == "PreconditionFailed" || code == "ConditionalRequestConflict" || st == 412 || st == 409 {
			return errExists
		}
		return fmt.Errorf("write %s: %w", p.uri(name), err)
	}
	return nil
}

func (p s3Place) put(ctx context.Context, name string, data []byte) error {
	_, err := p.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(p.bucket), Key: aws.String(p.key(name)),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		ContentType: aws.String(contentType(name)),
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", p.uri(name), err)
	}
	return nil
}

// putHint is put: a PUT is durable once answered.
func (p s3Place) putHint(ctx context.Context, name string, data []byte) error {
	return p.put(ctx, name, data)
}

func (p s3Place) remove(ctx context.Context, name string) error {
	_, err := p.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(p.bucket), Key: aws.String(p.key(name))})
	if err != nil && !missing(err) {
		return fmt.Errorf("delete %s: %w", p.uri(name), err)
	}
	return nil
}

// list is one ListObjectsV2 page per thousand entries, split at '/': the
// place's objects and the first element of deeper keys.
func (p s3Place) list(ctx context.Context) ([]string, error) {
	if p.lists != nil {
		p.lists.Add(1)
	}
	var out []string
	pages := s3.NewListObjectsV2Paginator(p.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(p.bucket), Prefix: aws.String(p.prefix), Delimiter: aws.String("/"),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			if missing(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("list s3://%s/%s: %w", p.bucket, p.prefix, err)
		}
		for _, o := range page.Contents {
			out = append(out, strings.TrimPrefix(aws.ToString(o.Key), p.prefix))
		}
		for _, cp := range page.CommonPrefixes {
			out = append(out, strings.TrimPrefix(aws.ToString(cp.Prefix), p.prefix))
		}
	}
	return out, nil
}

func contentType(name string) string {
	if strings.HasSuffix(name, ".json") {
		return "application/json"
	}
	return "text/plain"
}
