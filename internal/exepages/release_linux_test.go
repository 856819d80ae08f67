package exepages

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// keepCode links net/http's server into the test binary, so its read-only
// mappings are several times the few hundred kB any Go process touches
// just to run: what Release gives back then stands out from what comes
// back by itself.
var keepCode = http.ListenAndServeTLS

// madvPopulateRead maps every page of a range in (Linux 5.14).
const madvPopulateRead = 22

// childEnv makes the test binary the process under test (TestMain).
const childEnv = "EXEPAGES_TEST_CHILD"

// TestMain, in the child, maps in every read-only page of the executable,
// calls Release, says so on stdout with the mappings' size, and waits
// for stdin to close, touching as little as it can meanwhile: what the
// parent then reads from /proc is what Release left mapped.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "1" || keepCode == nil {
		os.Exit(m.Run())
	}
	size, err := populate()
	if err != nil {
		fmt.Printf("populate: %v\n", err)
		os.Exit(1)
	}
	if err := Release(); err != nil {
		fmt.Printf("release: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("released %d\n", size)
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// populate maps every page of the executable's read-only mappings in and
// returns their size.
func populate() (uintptr, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	raw, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	var size uintptr
	for _, line := range strings.Split(string(raw), "\n") {
		if s, e, ok := readOnlyMapping([]byte(line), exe); ok {
			if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, s, e-s, madvPopulateRead); errno != 0 {
				return 0, fmt.Errorf("MADV_POPULATE_READ (Linux 5.14): %w", errno)
			}
			size += e - s
		}
	}
	return size, nil
}

// residentKB sums the Rss of pid's read-only private mappings of exe.
func residentKB(t *testing.T, pid int, exe string) int {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	total, counting := 0, false
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "Rss:"); ok {
			if counting {
				kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
				total += kb
			}
			continue
		}
		if _, _, ok := readOnlyMapping([]byte(line), exe); ok {
			counting = true
		} else if f := strings.Fields(line); len(f) > 0 && !strings.HasSuffix(f[0], ":") {
			counting = false // another mapping's header
		}
	}
	return total
}

func TestReleaseUnmapsTheExecutablesReadOnlyPages(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("the child: %v", err)
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the child said nothing: %v", err)
	}
	var size int
	if _, err := fmt.Sscanf(line, "released %d", &size); err != nil {
		if strings.Contains(line, "POPULATE") {
			t.Skipf("the child could not map its pages in: %s", line)
		}
		t.Fatalf("the child: %s", line)
	}
	after := residentKB(t, cmd.Process.Pid, exe)
	// Release ran after every page was mapped in; what came back since is
	// what the child ran and read to say so and to wait. How much one
	// touched page brings back is the kernel's choice, not Release's: a
	// fault maps more than the page it needs (a fault-around window, or
	// a large folio of the page cache), and how much varies with how the
	// file came into the page cache. On one Linux 6.18 machine, fresh
	// copies of the same test binary brought back 1.4–2.7 MB of their
	// 6.6 MB. A Release that gives nothing back leaves all 6.6 MB
	// resident, so half still tells the two apart.
	if after > size/1024/2 {
		t.Errorf("%d kB of the child's %d kB of read-only executable pages resident after Release", after, size/1024)
	}
	t.Logf("%d kB of %d kB resident after Release", after, size/1024)
}

func TestReadOnlyMappingTakesOnlyPrivateUnwritableMappingsOfThePath(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"00400000-027f1000 r-xp 00000000 fd:00 1234   /usr/bin/streamcast", true},
		{"027f1000-04e38000 r--p 023f1000 fd:00 1234   /usr/bin/streamcast", true},
		{"04e38000-05002000 rw-p 04a38000 fd:00 1234   /usr/bin/streamcast", false},
		{"00400000-027f1000 r-xs 00000000 fd:00 1234   /usr/bin/streamcast", false},
		{"00400000-027f1000 r-xp 00000000 fd:00 1234   /usr/bin/streamcast2", false},
		{"7f00-7f10 r--p 00000000 fd:00 99   /usr/lib/libc.so.6", false},
		{"1e2192400000-1e2193800000 rw-p 00000000 00:00 0 ", false},
		{"027f1000-00400000 r--p 023f1000 fd:00 1234   /usr/bin/streamcast", false},
		{"zz-04e38000 r--p 023f1000 fd:00 1234   /usr/bin/streamcast", false},
		{"", false},
	} {
		if _, _, ok := readOnlyMapping([]byte(tc.line), "/usr/bin/streamcast"); ok != tc.ok {
			t.Errorf("%q: taken %v, want %v", tc.line, ok, tc.ok)
		}
	}
}
