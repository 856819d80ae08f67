package logstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The S3 tests run against a real S3 server: versitygw, serving a temp
// directory on 127.0.0.1. .ci/run installs it into <repo>/.tools/bin; when
// it is missing the helper installs it there itself, so `go test ./...`
// passes on a fresh machine. A test that cannot get a server fails: an
// S3 test that skipped would pass without testing anything.
const (
	versitygwModule  = "github.com/versity/versitygw/cmd/versitygw"
	versitygwVersion = "v1.8.0"
	testBucket       = "streamcast-test"
	testRegion       = "us-east-1"
)

// s3Server is a running versitygw.
type s3Server struct {
	t              testing.TB
	bin, dir, addr string
	logPath        string
	access, secret string
	cmd            *exec.Cmd
	logs           *os.File
}

// startS3 starts versitygw over a fresh directory with fresh credentials,
// creates testBucket, and stops the server when the test ends.
func startS3(t testing.TB) *s3Server {
	t.Helper()
	bin := versitygwBinary(t)
	s := &s3Server{t: t, bin: bin, dir: t.TempDir(), access: randomHex(10), secret: randomHex(20)}
	s.logPath = filepath.Join(t.TempDir(), "versitygw.log")
	s.addr = freeAddr(t)
	s.start()
	t.Cleanup(s.stop)
	ctx := context.Background()
	if _, err := s.client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(testBucket)}); err != nil {
		t.Fatalf("create bucket %s on versitygw at %s: %v", testBucket, s.addr, err)
	}
	return s
}

// start runs versitygw and waits until it accepts connections.
func (s *s3Server) start() {
	t := s.t
	t.Helper()
	logs, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	s.logs = logs
	cmd := exec.Command(s.bin, "--port", s.addr, "--quiet", "posix", s.dir)
	// The root credentials go through the environment, never argv.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.access, "ROOT_SECRET_ACCESS_KEY="+s.secret)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", s.bin, err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.stop()
			out, _ := os.ReadFile(logs.Name())
			t.Fatalf("versitygw did not listen on %s within 20s: %v\n%s", s.addr, err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the server (the data directory stays for a restart).
func (s *s3Server) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
	if s.logs != nil {
		s.logs.Close()
		s.logs = nil
	}
}

// endpoint is the server's URL.
func (s *s3Server) endpoint() string { return "http://" + s.addr }

// client is an S3 client with the server's credentials.
func (s *s3Server) client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.endpoint()),
		Region:       testRegion,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.access, s.secret, ""),
	})
}

// useCredentials puts the server's credentials where the AWS SDK finds
// them, in this process and the children it starts, for the test.
func (s *s3Server) useCredentials(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", s.access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.secret)
	t.Setenv("AWS_REGION", testRegion)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
}

// config returns a log config publishing to prefix under the test bucket.
func (s *s3Server) config(prefix string) Config {
	c := tierConfig()
	c.Published = "s3://" + testBucket + "/" + prefix
	c.S3 = S3Config{Endpoint: s.endpoint(), Region: testRegion, PathStyle: true}
	return c
}

// keys lists the object keys under prefix.
func (s *s3Server) keys(t testing.TB, prefix string) []string {
	t.Helper()
	var out []string
	p := s3.NewListObjectsV2Paginator(s.client(), &s3.ListObjectsV2Input{Bucket: aws.String(testBucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list %s: %v", prefix, err)
		}
		for _, o := range page.Contents {
			out = append(out, aws.ToString(o.Key))
		}
	}
	return out
}

var installMu sync.Mutex

// versitygwBinary returns the path of versitygw under <repo>/.tools/bin,
// installing it there first when it is missing.
func versitygwBinary(t testing.TB) string {
	t.Helper()
	root := repoRoot(t)
	gobin := filepath.Join(root, ".tools", "bin")
	bin := filepath.Join(gobin, "versitygw")
	installMu.Lock()
	defer installMu.Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(gobin, 0o755); err != nil {
		t.Fatal(err)
	}
	// Test binaries of several packages may run at once: one installs.
	lk, err := waitLock(filepath.Join(root, ".tools", "install.lock"), 10*time.Minute)
	if err != nil {
		t.Fatalf("install versitygw: %v", err)
	}
	defer lk.release()
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("installing %s@%s into %s", versitygwModule, versitygwVersion, gobin)
	cmd := exec.Command("go", "install", versitygwModule+"@"+versitygwVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=")
	cmd.Dir = gobin // outside any module: the install must not touch go.mod
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("versitygw is missing and installing it failed (run: GOBIN=%s go install %s@%s): %v\n%s", gobin, versitygwModule, versitygwVersion, err, out)
	}
	return bin
}

// waitLock takes an exclusive flock on path, waiting up to d.
func waitLock(path string, d time.Duration) (*fileLock, error) {
	deadline := time.Now().Add(d)
	for {
		lk, err := tryLock(path)
		var le *LockedError
		if err == nil || !errors.As(err, &le) || time.Now().After(deadline) {
			return lk, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// repoRoot returns the directory holding go.mod above the working
// directory (the package's directory under go test).
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/streamcast/streamcast") {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod of github.com/streamcast/streamcast above %s", dir)
		}
	}
}

// freeAddr returns a 127.0.0.1 address nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestS3ServerHelperServesABucket(t *testing.T) {
	s := startS3(t)
	ctx := context.Background()
	_, err := s.client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: aws.String("a/b"), Body: strings.NewReader("x")})
	if err != nil {
		t.Fatal(err)
	}
	if keys := s.keys(t, "a/"); fmt.Sprint(keys) != "[a/b]" {
		t.Fatalf("keys = %v", keys)
	}
	// Wrong credentials are refused.
	bad := s3.New(s3.Options{BaseEndpoint: aws.String(s.endpoint()), Region: testRegion, UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s.access, "wrong", "")})
	if _, err := bad.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket)}); err == nil {
		t.Fatal("versitygw accepted wrong credentials")
	}
}
