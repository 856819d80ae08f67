//go:build linux

package broker

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

// A real S3 server for the tests that publish through serve: versitygw over
// a temp directory on 127.0.0.1, as pkg/logstore's tests run it (its
// helper is test code of another package, so this is a small copy). It
// comes from <repo>/.tools/bin, where .ci/run installs it; when it is
// missing the helper installs it there, so a fresh machine needs no extra
// step. A test that cannot get a server fails, never skips.
const (
	versitygwModule  = "github.com/versity/versitygw/cmd/versitygw"
	versitygwVersion = "v1.8.0"
	testBucket       = "streamcast-test"
	testRegion       = "us-east-1"
)

// s3Server is a running versitygw.
type s3Server struct {
	addr, access, secret string
}

// startS3 starts versitygw with fresh credentials, creates testBucket, and
// stops the server when the test ends.
func startS3(t *testing.T) *s3Server {
	t.Helper()
	bin := versitygwBinary(t)
	s := &s3Server{addr: freeAddr(t), access: randomHex(10), secret: randomHex(20)}
	logPath := filepath.Join(t.TempDir(), "versitygw.log")
	logs, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--port", s.addr, "--quiet", "posix", t.TempDir())
	// The root credentials go through the environment, never argv.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.access, "ROOT_SECRET_ACCESS_KEY="+s.secret)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := helperForker.start(cmd); err != nil {
		logs.Close()
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logs.Close()
	})
	waitFor(t, "versitygw to listen on "+s.addr, 20*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", s.addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if _, err := s.client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(testBucket)}); err != nil {
		out, _ := os.ReadFile(logPath)
		t.Fatalf("create bucket %s on versitygw at %s: %v\n%s", testBucket, s.addr, err, out)
	}
	return s
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
func (s *s3Server) useCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", s.access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.secret)
	t.Setenv("AWS_REGION", testRegion)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
}

// keys lists the object keys of testBucket under prefix.
func (s *s3Server) keys(t *testing.T, prefix string) []string {
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

// helperForker starts the tests' helper servers from one locked thread that
// lives as long as the test binary. Pdeathsig fires when the forking thread
// ends, not the process: forked from an ordinary goroutine, versitygw would
// die whenever a Server's own forker, locked to that same thread, exits at
// Close.
var helperForker *forker // made and closed by TestMain

// versitygwBinary returns <repo>/.tools/bin/versitygw, installing it first
// when it is missing (under a lock file: several packages' tests may try at
// once).
func versitygwBinary(t *testing.T) string {
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
// working directory.
func repoRoot(t *testing.T) string {
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
func freeAddr(t *testing.T) string {
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
