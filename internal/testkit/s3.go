//go:build linux

// A real S3 server for tests: versitygw, serving a temp directory on
// 127.0.0.1 with fresh credentials, the one helper every package's S3
// tests share. .ci/run installs versitygw into <repo>/.tools/bin; when it
// is missing, StartS3 installs it there itself, so `go test ./...` passes
// on a fresh machine. A test that cannot get a server fails: an S3 test
// that skipped would pass without testing anything.

package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

const (
	versitygwModule  = "github.com/versity/versitygw/cmd/versitygw"
	versitygwVersion = "v1.8.0"

	// Bucket is the bucket StartS3 creates.
	Bucket = "streamcast-test"
	// Region is the region clients should name.
	Region = "us-east-1"
)

// S3Server is a running versitygw. Stop and Start take it down and bring it
// back over the same directory, address and credentials (an outage).
type S3Server struct {
	Addr, Access, Secret string

	t       testing.TB
	bin     string
	dir     string
	logPath string
	fork    func(*exec.Cmd) error
	cmd     *exec.Cmd
	logs    *os.File
}

// StartS3 starts versitygw, creates Bucket, and stops the server when the
// test ends. fork starts the process (nil: cmd.Start). The server gets
// Pdeathsig, which fires when the forking thread ends: a package whose code
// under test ends threads (a locked forker goroutine) passes a fork that
// runs on a thread outliving the test.
func StartS3(t testing.TB, fork func(*exec.Cmd) error) *S3Server {
	t.Helper()
	if fork == nil {
		fork = (*exec.Cmd).Start
	}
	s := &S3Server{t: t, bin: versitygwBinary(t), dir: t.TempDir(), Access: randomHex(10), Secret: randomHex(20), fork: fork}
	s.logPath = filepath.Join(t.TempDir(), "versitygw.log")
	s.Addr = freeAddr(t)
	s.Start()
	t.Cleanup(s.Stop)
	if _, err := s.Client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(Bucket)}); err != nil {
		out, _ := os.ReadFile(s.logPath)
		t.Fatalf("create bucket %s on versitygw at %s: %v\n%s", Bucket, s.Addr, err, out)
	}
	return s
}

// Start runs versitygw and waits until it accepts connections.
func (s *S3Server) Start() {
	t := s.t
	t.Helper()
	logs, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	s.logs = logs
	cmd := exec.Command(s.bin, "--port", s.Addr, "--quiet", "posix", s.dir)
	// The root credentials go through the environment, never argv.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.Access, "ROOT_SECRET_ACCESS_KEY="+s.Secret)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.fork(cmd); err != nil {
		t.Fatalf("start %s: %v", s.bin, err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.Stop()
			out, _ := os.ReadFile(s.logPath)
			t.Fatalf("versitygw did not listen on %s within 20s: %v\n%s", s.Addr, err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop ends the server; its data directory stays for a Start.
func (s *S3Server) Stop() {
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

// Endpoint is the server's URL.
func (s *S3Server) Endpoint() string { return "http://" + s.Addr }

// Client is an S3 client with the server's credentials.
func (s *S3Server) Client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint()),
		Region:       Region,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.Access, s.Secret, ""),
	})
}

// UseCredentials puts the server's credentials where the AWS SDK finds
// them, in this process and the children it starts, for the test.
func (s *S3Server) UseCredentials(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", s.Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.Secret)
	t.Setenv("AWS_REGION", Region)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
}

// Keys lists the object keys under prefix in Bucket.
func (s *S3Server) Keys(t testing.TB, prefix string) []string {
	t.Helper()
	var out []string
	p := s3.NewListObjectsV2Paginator(s.Client(), &s3.ListObjectsV2Input{Bucket: aws.String(Bucket), Prefix: aws.String(prefix)})
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

// versitygwBinary returns the path of versitygw under <repo>/.tools/bin, installing
// it there first when it is missing.
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
	lk, err := os.OpenFile(filepath.Join(root, ".tools", "install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if err := syscall.Flock(int(lk.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("lock %s: %v", lk.Name(), err)
	}
	defer syscall.Flock(int(lk.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("installing %s@%s into %s", versitygwModule, versitygwVersion, gobin)
	cmd := exec.Command("go", "install", versitygwModule+"@"+versitygwVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=")
	cmd.Dir = gobin // outside any module: the install must not touch go.mod
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("versitygw is missing and installing it failed (run: GOBIN=%s go install %s@%s): %v\n%s", gobin, versitygwModule, versitygwVersion, err, out)
	}
	return bin
}

// repoRoot returns the directory holding streamcast's go.mod above the
// working directory (the package's directory under go test).
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
