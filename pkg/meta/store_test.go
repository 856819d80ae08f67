//go:build linux

package meta

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/schema"
)

// testEnv is one root and one published prefix, local or on versitygw.
type testEnv struct {
	kind string // "file" or "s3"
	root string
	pub  string // the published: value
	s3   warehouse.S3
	srv  *testkit.S3Server
	key  string // the S3 key prefix of pub ("" for file)
}

// envs returns a fresh file:// env and a fresh s3:// env (one versitygw
// per test, a fresh key prefix per call).
type envMaker struct {
	srv *testkit.S3Server
}

func newEnvMaker(t *testing.T) *envMaker {
	srv := testkit.StartS3(t, nil)
	srv.UseCredentials(t)
	return &envMaker{srv: srv}
}

func (m *envMaker) kinds() []string { return []string{"file", "s3"} }

func (m *envMaker) env(t *testing.T, kind string) testEnv {
	t.Helper()
	dir := t.TempDir()
	e := testEnv{kind: kind, root: filepath.Join(dir, "root")}
	switch kind {
	case "file":
		e.pub = "file://" + filepath.Join(dir, "pub")
	default:
		e.key = "p" + randHex(4)
		e.pub = "s3://" + testkit.Bucket + "/" + e.key
		e.srv = m.srv
		e.s3 = warehouse.S3{Endpoint: m.srv.Endpoint(), Region: testkit.Region, PathStyle: true}
	}
	return e
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (e testEnv) layout(t testing.TB) Layout {
	t.Helper()
	lay, err := NewLayout(e.root, e.pub)
	if err != nil {
		t.Fatal(err)
	}
	return lay
}

func (e testEnv) store(t testing.TB, stream string) *Store {
	t.Helper()
	st, err := NewStore(context.Background(), e.layout(t), stream, e.s3)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// putPublished puts an object at <prefix>/<rel>, as another process (a
// publish child, a replicator) would.
func (e testEnv) putPublished(t *testing.T, rel string, data []byte) {
	t.Helper()
	if e.kind == "file" {
		p := filepath.Join(strings.TrimPrefix(e.pub, "file://"), filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	_, err := e.srv.Client().PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(testkit.Bucket), Key: aws.String(e.key + "/" + rel), Body: strings.NewReader(string(data)),
	})
	if err != nil {
		t.Fatal(err)
	}
}

// getURI reads a file:// or s3:// URI the way an independent reader
// would: a plain file read or an S3 GET.
func (e testEnv) getURI(t *testing.T, uri string) []byte {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	switch u.Scheme {
	case "file":
		b, err := os.ReadFile(u.Path)
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		return b
	case "s3":
		out, err := e.srv.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(u.Host), Key: aws.String(strings.TrimPrefix(u.Path, "/"))})
		if err != nil {
			t.Fatalf("GET %s: %v", uri, err)
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("%s is neither file:// nor s3://", uri)
	return nil
}

// publishedVersions lists the vN of the published metadata directory.
func (e testEnv) publishedVersions(t *testing.T, stream string) []int {
	t.Helper()
	var names []string
	if e.kind == "file" {
		ents, err := os.ReadDir(filepath.Join(strings.TrimPrefix(e.pub, "file://"), stream, stream+".metadata"))
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range ents {
			names = append(names, en.Name())
		}
	} else {
		for _, k := range e.srv.Keys(t, e.key+"/"+stream+"/"+stream+".metadata/") {
			names = append(names, k[strings.LastIndex(k, "/")+1:])
		}
	}
	return versionsOf(names)
}

func versionsOf(names []string) []int {
	var out []int
	for _, n := range names {
		if v, ok := strings.CutPrefix(n, "v"); ok {
			if num, ok := strings.CutSuffix(v, ".metadata.json"); ok {
				if i, err := strconv.Atoi(num); err == nil {
					out = append(out, i)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func homeVersions(t *testing.T, lay Layout, stream string) []int {
	t.Helper()
	ents, err := os.ReadDir(lay.MetadataDir(stream))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range ents {
		names = append(names, en.Name())
	}
	return versionsOf(names)
}

// start is what serve does with a stream at start-up, through this
// package: resolve, create the first log when there is nothing anywhere,
// else open the log the metadata names; then append n rows and close. It
// returns the metadata and the offsets it acknowledged.
func start(t *testing.T, e testEnv, st *Store, n int) (*Metadata, []int64, error) {
	t.Helper()
	ctx := context.Background()
	lay := e.layout(t)
	res, err := Resolve(ctx, st)
	if err != nil {
		return nil, nil, err
	}
	m := res.Metadata
	var lg *logstore.Log
	if m == nil {
		name := LogName(st.Stream(), 1)
		if err := os.MkdirAll(lay.StreamDir(st.Stream()), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := logstore.Config{Stream: st.Stream(), Log: name, Published: lay.StoredPublished(st.Stream(), name), S3: e.s3}
		lg, err = logstore.Create(lay.LogDir(st.Stream(), name), schema.Any(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		first, err := New(st.Stream())
		if err != nil {
			t.Fatal(err)
		}
		d, err := DescribeLog(lg, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := first.AddLog(d, lg.Schema()); err != nil {
			t.Fatal(err)
		}
		if m, err = st.Commit(ctx, first); err != nil {
			lg.Close()
			return nil, nil, err
		}
	} else {
		if m.Retired() {
			return m, nil, nil // takes no rows
		}
		lg, err = logstore.Open(lay.LogDir(st.Stream(), m.Current().Name), logstore.Writer)
		if err != nil {
			return nil, nil, err
		}
		if err := m.CheckLive(lg); err != nil {
			lg.Close()
			return nil, nil, err
		}
	}
	defer lg.Close()
	var acked []int64
	for i := range n {
		off, err := lg.Append(ctx, [][]byte{[]byte(`{"i":` + strconv.Itoa(i) + `}`)}, time.Now().UnixMicro(), nil)
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, off)
	}
	return m, acked, nil
}

// loseHomeMetadata deletes the home's metadata, keeping its logs.
func loseHomeMetadata(t *testing.T, lay Layout, stream string) {
	t.Helper()
	if err := os.RemoveAll(lay.MetadataDir(stream)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(lay.MetadataFile(stream)); err != nil {
		t.Fatal(err)
	}
}

// acks collects acknowledged offsets and fails on one given twice.
type acks map[int64]bool

func (a acks) add(t *testing.T, offs []int64) {
	t.Helper()
	for _, o := range offs {
		if a[o] {
			t.Fatalf("offset %d acknowledged twice (I8)", o)
		}
		a[o] = true
	}
}

func TestCommitWritesBothPlacesAndKeepsTenVersions(t *testing.T) {
	mk := newEnvMaker(t)
	for _, kind := range mk.kinds() {
		t.Run(kind, func(t *testing.T) {
			e := mk.env(t, kind)
			st := e.store(t, "trades")
			ctx := context.Background()
			m, err := New("trades")
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 13; i++ {
				m.Retention.MaxAge = aws.String(strconv.Itoa(i) + "d")
				if m, err = st.Commit(ctx, m); err != nil {
					t.Fatal(err)
				}
				if m.Version != i {
					t.Fatalf("commit %d wrote version %d", i, m.Version)
				}
			}
			want := []int{4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
			if got := e.publishedVersions(t, "trades"); !slices.Equal(got, want) {
				t.Errorf("published versions %v, want %v", got, want)
			}
			if got := homeVersions(t, e.layout(t), "trades"); !slices.Equal(got, want) {
				t.Errorf("home versions %v, want %v", got, want)
			}
			// An independent reader follows the published hint.
			hint := strings.TrimSpace(string(e.getURI(t, st.PublishedHintURI())))
			if hint != "13" {
				t.Fatalf("the published hint says %q, want 13", hint)
			}
			vURI := strings.TrimSuffix(st.PublishedHintURI(), HintFile) + "v" + hint + ".metadata.json"
			v := e.getURI(t, vURI)
			plain := e.getURI(t, st.PublishedURI())
			if string(v) != string(plain) {
				t.Fatalf("the plain copy differs from v%s", hint)
			}
			got, err := Parse(v)
			if err != nil || got.StreamID != m.StreamID || *got.Retention.MaxAge != "13d" || got.Version != 13 {
				t.Fatalf("v13 reads %+v, %v", got, err)
			}
			home, err := st.Load(ctx)
			if err != nil || home.Version != 13 || home.StreamID != m.StreamID {
				t.Fatalf("the home reads %+v, %v", home, err)
			}
		})
	}
}

// TestConditionalPutLetsOneWriterWin checks, on versitygw itself, that a
// PUT with If-None-Match: * is refused when the key exists, and that of
// many racing ones exactly one lands.
func TestConditionalPutLetsOneWriterWin(t *testing.T) {
	srv := testkit.StartS3(t, nil)
	c := srv.Client()
	ctx := context.Background()
	put := func(key, body string) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(testkit.Bucket), Key: aws.String(key), Body: strings.NewReader(body), IfNoneMatch: aws.String("*")})
		return err
	}
	if err := put("k", "a"); err != nil {
		t.Fatal(err)
	}
	if err := put("k", "b"); err == nil {
		t.Fatal("versitygw accepted a conditional PUT over an existing key: it does not support If-None-Match")
	}
	for round := range 5 {
		key := "race" + strconv.Itoa(round)
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if put(key, strconv.Itoa(w)) == nil {
					mu.Lock()
					won++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("round %d: %d conditional PUTs of one key succeeded, want 1", round, won)
		}
	}
}

// TestTwoProcessesCommitTheSameVersion runs two real processes that read
// version 1 and commit version 2 at once: one wins, the other gets
// ErrConflict and re-reads the winner's version.
func TestTwoProcessesCommitTheSameVersion(t *testing.T) {
	mk := newEnvMaker(t)
	for _, kind := range mk.kinds() {
		t.Run(kind, func(t *testing.T) {
			e := mk.env(t, kind)
			st := e.store(t, "trades")
			m, err := New("trades")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Commit(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			for round := range 3 {
				go1 := filepath.Join(t.TempDir(), "go")
				var cmds []*exec.Cmd
				var outs []*strings.Builder
				for w := range 2 {
					cmd := exec.Command(os.Args[0], "-test.run=^TestCommitChild$", "-test.v")
					cmd.Env = append(os.Environ(), "META_CHILD=1", "META_ROOT="+e.root, "META_PUB="+e.pub,
						"META_ENDPOINT="+e.s3.Endpoint, "META_GO="+go1, "META_NAME=writer"+strconv.Itoa(w))
					out := &strings.Builder{}
					cmd.Stdout, cmd.Stderr = out, out
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					cmds, outs = append(cmds, cmd), append(outs, out)
				}
				// Each child announces that it has read the current version;
				// once both have, they commit together.
				deadline := time.Now().Add(30 * time.Second)
				for w := range 2 {
					for {
						if _, err := os.Stat(go1 + ".ready-writer" + strconv.Itoa(w)); err == nil {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("child %d did not read the metadata within 30s", w)
						}
						time.Sleep(time.Millisecond)
					}
				}
				if err := os.WriteFile(go1, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				won, lost := 0, 0
				var winner string
				for i, cmd := range cmds {
					if err := cmd.Wait(); err != nil {
						t.Fatalf("child %d: %v\n%s", i, err, outs[i])
					}
					out := outs[i].String()
					switch {
					case strings.Contains(out, "RESULT won"):
						won++
						winner = fmt.Sprintf("writer%d", i)
					case strings.Contains(out, "RESULT conflict"):
						lost++
					default:
						t.Fatalf("child %d said neither won nor conflict:\n%s", i, out)
					}
				}
				if won != 1 || lost != 1 {
					t.Fatalf("round %d: %d won, %d lost; want exactly one of each\n%s\n%s", round, won, lost, outs[0], outs[1])
				}
				for i, out := range outs {
					if !strings.Contains(out.String(), "REREAD "+winner) {
						t.Fatalf("child %d did not re-read the winner's version (%s):\n%s", i, winner, out)
					}
				}
			}
		})
	}
}

// TestCommitChild is the child of TestTwoProcessesCommitTheSameVersion; it
// does nothing unless META_CHILD is set.
func TestCommitChild(t *testing.T) {
	if os.Getenv("META_CHILD") == "" {
		return
	}
	ctx := context.Background()
	var s3cfg warehouse.S3
	if ep := os.Getenv("META_ENDPOINT"); ep != "" {
		s3cfg = warehouse.S3{Endpoint: ep, Region: testkit.Region, PathStyle: true}
	}
	lay, err := NewLayout(os.Getenv("META_ROOT"), os.Getenv("META_PUB"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewStore(ctx, lay, "trades", s3cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Resolve(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Metadata
	name := os.Getenv("META_NAME")
	m.Intent, err = NewIntent("test", map[string]string{"by": name})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv("META_GO")+".ready-"+name, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(os.Getenv("META_GO")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no go signal within 30s")
		}
		time.Sleep(time.Millisecond)
	}
	_, err = st.Commit(ctx, m)
	switch {
	case err == nil:
		fmt.Println("RESULT won")
	case errors.Is(err, ErrConflict):
		fmt.Println("RESULT conflict:", err)
	default:
		t.Fatal(err)
	}
	// Re-read: Resolve brings the home to the published version.
	res, err = Resolve(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	var by struct{ By string }
	if err := res.Metadata.Intent.Decode(&by); err != nil {
		t.Fatal(err)
	}
	fmt.Println("REREAD", by.By, res.Metadata.Version)
}

// fileEnv is a file:// env without versitygw.
func fileEnv(t *testing.T) testEnv {
	dir := t.TempDir()
	return testEnv{kind: "file", root: filepath.Join(dir, "root"), pub: "file://" + filepath.Join(dir, "pub")}
}

// TestCommitFsyncsEachPlaceTwice counts what a commit costs the disk in
// directory fsyncs: per local place one for the version (the commit
// point, before the hint may name it) and one for the plain copy; the
// hint's rename rides on the next version's (docs/design.md §4.7, the metadata
// store). Each directory fsync is a flush a neighbour's commit queues
// behind while a migration commits.
func TestCommitFsyncsEachPlaceTwice(t *testing.T) {
	e := fileEnv(t)
	st := e.store(t, "trades")
	commits(t, st, 3, func(i int) {
		if n := st.syncs.Swap(0); n != 4 {
			t.Fatalf("commit %d fsynced %d directories, want 4 (two places, the version's and the plain copy's each)", i, n)
		}
	})
}

// commits commits n versions of a new stream's metadata to st, calling
// after (if set) after each, and returns the last.
func commits(t *testing.T, st *Store, n int, after func(i int)) *Metadata {
	t.Helper()
	m, err := New(st.Stream())
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if m, err = st.Commit(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		if after != nil {
			after(i)
		}
	}
	return m
}

// TestHintLeftBehindByACrashReadsTheNewestVersion is the crash the
// unsynced hint allows: version N durable, the hint's rename lost, so the
// hint names N-1. Every reader of ours probes past it, and the next
// commit writes N+1.
func TestHintLeftBehindByACrashReadsTheNewestVersion(t *testing.T) {
	e := fileEnv(t)
	st := e.store(t, "trades")
	ctx := context.Background()
	commits(t, st, 2, nil)
	for _, dir := range []string{e.layout(t).StreamDir("trades"), filepath.Join(strings.TrimPrefix(e.pub, "file://"), "trades")} {
		if err := os.WriteFile(filepath.Join(dir, "trades.metadata", HintFile), []byte("1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for what, load := range map[string]func(context.Context) (*Metadata, error){"home": st.Load, "published": st.LoadPublished} {
		got, err := load(ctx)
		if err != nil || got.Version != 2 {
			t.Fatalf("the %s with its hint one behind reads %+v, %v; want version 2", what, got, err)
		}
	}
	res, err := Resolve(ctx, st)
	if err != nil || res.Metadata.Version != 2 {
		t.Fatalf("resolve with both hints one behind: %+v, %v; want version 2", res, err)
	}
	if m, err := st.Commit(ctx, res.Metadata); err != nil || m.Version != 3 {
		t.Fatalf("the next commit: %+v, %v; want version 3", m, err)
	}
	if hint := strings.TrimSpace(string(e.getURI(t, st.PublishedHintURI()))); hint != "3" {
		t.Fatalf("the published hint says %q after the next commit, want 3", hint)
	}
}
