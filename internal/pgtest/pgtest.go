// Package pgtest runs a throwaway PostgreSQL server for a test: initdb and
// postgres in a temporary directory, on a free 127.0.0.1 port, stopped and
// removed in t.Cleanup. As root it runs them as the unprivileged user
// "nobody", because postgres refuses to run as root.
//
// When the binaries are absent the test is skipped with a message saying
// what to install, unless STREAMCAST_REQUIRE_POSTGRES=1 (CI sets it), in
// which case their absence fails the test.
package pgtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireEnv is the environment variable that turns a missing PostgreSQL
// from a skip into a failure.
const RequireEnv = "STREAMCAST_REQUIRE_POSTGRES"

// startWait caps how long initdb plus the server's start may take on a
// loaded two-core machine.
const startWait = 90 * time.Second

// Server is one running PostgreSQL server.
type Server struct {
	// DSN connects as the superuser "postgres" to the database "postgres",
	// without TLS: postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable.
	DSN string
	// Port is the server's TCP port on 127.0.0.1.
	Port int
	// Dir is the temporary directory holding the data directory and the
	// unix socket.
	Dir string

	bin  string // directory of the binaries
	cred *credential
	cmd  *exec.Cmd
	done chan struct{} // closed when the server process has been waited for
	log  *lockedBuffer
}

// Start runs a fresh server for t and registers its stop with t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := FindBinaries()
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("pgtest: %v (%s=1, so PostgreSQL is required)", err, RequireEnv)
		}
		t.Skipf("pgtest: %v; skipping (install Debian's postgresql package to run this test)", err)
	}
	cred, err := unprivileged()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := cred.own(dir); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	s := &Server{Dir: dir, bin: bin, cred: cred}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--no-sync", "--locale=C")
	initdb.Dir = dir
	cred.apply(initdb)
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	// A free port can be taken between the probe and the server's bind;
	// another try with another port settles that.
	var lastErr error
	for try := 0; try < 3; try++ {
		if lastErr = s.start(data); lastErr == nil {
			t.Cleanup(s.stop)
			return s
		}
	}
	t.Fatalf("pgtest: %v", lastErr)
	return nil
}

// start runs postgres on a free port and waits for it to accept
// connections.
func (s *Server) start(data string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", data,
		"-p", strconv.Itoa(port), "-k", s.Dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off",
		"-c", "max_connections=100", "-c", "shared_buffers=32MB")
	cmd.Dir = s.Dir
	s.cred.apply(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.log = &lockedBuffer{}
	ready := make(chan struct{})
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			s.log.WriteLine(line)
			if strings.Contains(line, "ready to accept connections") {
				once.Do(func() { close(ready) })
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	done := make(chan struct{})
	go func() {
		<-scanned // Wait closes the pipe: read it to its end first
		cmd.Wait()
		close(done)
	}()
	select {
	case <-ready:
		s.cmd, s.done, s.Port = cmd, done, port
		s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		return nil
	case <-done:
		return fmt.Errorf("postgres exited before accepting connections:\n%s", s.log.String())
	case <-time.After(startWait):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("postgres did not accept connections within %v:\n%s", startWait, s.log.String())
	}
}

// CreateDB creates the database name with the createdb binary beside
// postgres and returns the DSN that connects to it, so tests can isolate
// themselves on one server.
func (s *Server) CreateDB(t testing.TB, name string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, "createdb"), "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres", name)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: createdb %s: %v\n%s", name, err, out)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, name)
}

// Log returns what the server has written to its stderr so far.
func (s *Server) Log() string { return s.log.String() }

// stop shuts the server down fast (SIGINT: roll back open transactions,
// no waiting for clients) and kills it if that takes too long.
func (s *Server) stop() {
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// FindBinaries returns the directory holding initdb and postgres: from
// PATH, else the newest /usr/lib/postgresql/*/bin (Debian's layout, which
// does not put them on PATH).
func FindBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if isFile(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, dir := range dirs {
		if isFile(filepath.Join(dir, "initdb")) && isFile(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, postgres) on PATH or in /usr/lib/postgresql/*/bin")
}

// version is the major version in /usr/lib/postgresql/N/bin, 0 when none.
func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer collects the server's log lines for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) WriteLine(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 64<<10 {
		l.b.WriteString(s)
		l.b.WriteByte('\n')
	}
}

func (l *lockedBuffer) String() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
