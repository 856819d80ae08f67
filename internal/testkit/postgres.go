// A throwaway PostgreSQL server for a test: initdb and
// postgres in a temporary directory, on a free 127.0.0.1 port, stopped and
// removed in t.Cleanup. As root it runs them as the unprivileged user
// "nobody", because postgres refuses to run as root.
//
// When the binaries are absent the test is skipped with a message saying
// what to install, unless STREAMCAST_REQUIRE_POSTGRES=1 (CI sets it), in
// which case their absence fails the test.

package testkit

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
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// PostgresRequiredEnv is the environment variable that turns a missing PostgreSQL
// from a skip into a failure.
const PostgresRequiredEnv = "STREAMCAST_REQUIRE_POSTGRES"

// startWait caps how long initdb plus the server's start may take on a
// loaded two-core machine.
const startWait = 90 * time.Second

// Postgres is one running PostgreSQL server.
type Postgres struct {
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
	dbs  atomic.Int64 // databases made by NewDB, for their names
}

// ErrNoPostgres is NewPostgres's error when initdb and postgres are not installed.
var ErrNoPostgres = errors.New("no PostgreSQL server binaries (initdb, postgres) on PATH or in /usr/lib/postgresql/*/bin")

// StartPostgres runs a fresh server for t and registers its stop with t.Cleanup.
// Without the binaries it skips t, or fails it when PostgresRequiredEnv is "1".
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	s, err := NewPostgres()
	if errors.Is(err, ErrNoPostgres) {
		SkipPostgres(t)
	}
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// SkipPostgres skips t because PostgreSQL is not installed, or fails it when
// PostgresRequiredEnv is "1".
func SkipPostgres(t testing.TB) {
	t.Helper()
	if os.Getenv(PostgresRequiredEnv) == "1" {
		t.Fatalf("pgtest: %v (%s=1, so PostgreSQL is required)", ErrNoPostgres, PostgresRequiredEnv)
	}
	t.Skipf("pgtest: %v; skipping (install Debian's postgresql package to run this test)", ErrNoPostgres)
}

// NewPostgres runs a fresh server, for a TestMain that shares one among its tests;
// the caller must Stop it. It returns ErrNoPostgres when PostgreSQL is not
// installed.
func NewPostgres() (*Postgres, error) {
	bin, err := FindPostgres()
	if err != nil {
		return nil, err
	}
	cred, err := unprivileged()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	if err := cred.own(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Postgres{Dir: dir, bin: bin, cred: cred}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--no-sync", "--locale=C")
	initdb.Dir = dir
	cred.apply(initdb)
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	// A free port can be taken between the probe and the server's bind;
	// another try with another port settles that.
	var lastErr error
	for try := 0; try < 3; try++ {
		if lastErr = s.start(data); lastErr == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// start runs postgres on a free port and waits for it to accept
// connections.
func (s *Postgres) start(data string) error {
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
func (s *Postgres) CreateDB(t testing.TB, name string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, "createdb"), "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres", name)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: createdb %s: %v\n%s", name, err, out)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, name)
}

// NewDB creates a database of its own for t on this server and returns
// its DSN: tests sharing one server stay apart.
func (s *Postgres) NewDB(t testing.TB) string {
	t.Helper()
	return s.CreateDB(t, "db"+strconv.FormatInt(s.dbs.Add(1), 10))
}

// SharedPostgres is one server for a package's tests, started on first use. A
// package declares one, and its TestMain calls Stop after m.Run.
type SharedPostgres struct {
	once sync.Once
	s    *Postgres
	err  error
}

// Get returns the shared server, starting it on the first call. Without
// the binaries it skips t (or fails it under PostgresRequiredEnv=1); a server that
// would not start fails t.
func (sh *SharedPostgres) Get(t testing.TB) *Postgres {
	t.Helper()
	sh.once.Do(func() { sh.s, sh.err = NewPostgres() })
	if errors.Is(sh.err, ErrNoPostgres) {
		SkipPostgres(t)
	}
	if sh.err != nil {
		t.Fatalf("pgtest: %v", sh.err)
	}
	return sh.s
}

// Stop stops the shared server if it was started.
func (sh *SharedPostgres) Stop() {
	sh.once.Do(func() {}) // a Get racing with Stop finds nothing to start
	if sh.s != nil {
		sh.s.Stop()
	}
}

// Log returns what the server has written to its stderr so far.
func (s *Postgres) Log() string { return s.log.String() }

// Stop shuts the server down fast (SIGINT: roll back open transactions,
// no waiting for clients), kills it if that takes too long, and removes
// its directory.
func (s *Postgres) Stop() {
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	os.RemoveAll(s.Dir)
}

// FindPostgres returns the directory holding initdb and postgres: from
// PATH, else the newest /usr/lib/postgresql/*/bin (Debian's layout, which
// does not put them on PATH).
func FindPostgres() (string, error) {
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
	return "", ErrNoPostgres
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
