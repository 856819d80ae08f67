package idlecost

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
)

// Settings, from the environment so one command line measures any size:
//
//	STREAMCAST_IDLE_STREAMS  durable streams in the config (default 1000)
//	STREAMCAST_IDLE_WINDOW   the idle window measured (default 60s: one flush boundary at least)
//	STREAMCAST_IDLE_SETTLE   the longest wait, after every child is ready, for them to settle (default 15m)
//	STREAMCAST_IDLE_BINARY   a streamcast binary to measure (default: go build this tree)
//	STREAMCAST_IDLE_MAX_OPEN maintain.max_open_logs in the config (default: not set)
//	STREAMCAST_IDLE_COLD     set to 1 to drop the binary from the page cache before each run
//
// The binary's pages each process maps count in its RSS, and how many a
// touch maps depends on the page cache: a binary just written (go build,
// cp) is cached in large folios, some mapped 2 MB at a time, one read back
// from disk in small ones. STREAMCAST_IDLE_COLD=1 starts every run from
// the disk, so two binaries compare alike.
func setting(b *testing.B, name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func duration(b *testing.B, name, def string) time.Duration {
	d, err := time.ParseDuration(setting(b, name, def))
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return d
}

// BenchmarkIdleStreams reports, for a server with STREAMCAST_IDLE_STREAMS
// idle durable streams: the seconds until every maintenance child was
// ready, and then until they settled; over the window after that, the
// resident and proportional memory (MB) and CPU (% of one core) of all
// maintenance children together and of serve, and the most descriptors
// any child held.
//
//	go test ./internal/testkit/idlecost -run '^$' -bench IdleStreams -benchtime 1x
func BenchmarkIdleStreams(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a real server with many streams and watches it idle for a while")
	}
	if runtime.GOOS != "linux" {
		b.Skip("reads /proc")
	}
	streams, err := strconv.Atoi(setting(b, "STREAMCAST_IDLE_STREAMS", "1000"))
	if err != nil || streams < 1 {
		b.Fatalf("STREAMCAST_IDLE_STREAMS: give a positive number of streams")
	}
	window := duration(b, "STREAMCAST_IDLE_WINDOW", "60s")
	settle := duration(b, "STREAMCAST_IDLE_SETTLE", "15m")
	bin := binary(b)
	// serve holds a few descriptors per durable stream: room for them,
	// where the process may raise its hard limit.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Max < uint64(10*streams+10_000) {
		want := syscall.Rlimit{Cur: uint64(10*streams + 10_000), Max: uint64(10*streams + 10_000)}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			b.Logf("the descriptor limit is %d; %d streams may need more (%v)", lim.Max, streams, err)
		}
	}
	for range b.N {
		measure(b, bin, streams, settle, window)
	}
}

// binary returns the streamcast binary to run, building this tree's when
// none is given.
func binary(b *testing.B) string {
	if p := os.Getenv("STREAMCAST_IDLE_BINARY"); p != "" {
		return p
	}
	path, err := testkit.BuildStreamcast(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return path
}

func measure(b *testing.B, bin string, streams int, settle, window time.Duration) {
	if os.Getenv("STREAMCAST_IDLE_COLD") == "1" {
		if err := dropCached(bin); err != nil {
			b.Fatalf("drop %s from the page cache: %v", bin, err)
		}
	}
	dir := b.TempDir()
	var cfg strings.Builder
	cfg.WriteString("log:\n  level: info\n")
	if v := os.Getenv("STREAMCAST_IDLE_MAX_OPEN"); v != "" {
		fmt.Fprintf(&cfg, "maintain:\n  max_open_logs: %s\n", v)
	}
	cfg.WriteString("streams:\n")
	for i := range streams {
		fmt.Fprintf(&cfg, "  - name: s%05d\n    durable: true\n", i)
	}
	cfgPath := filepath.Join(dir, "streamcast.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	addrFile := filepath.Join(dir, "addr")
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile, "--root", filepath.Join(dir, "data"), "--config", cfgPath)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	// serve says when every maintenance child reported ready: each has
	// checked every log.
	ready := make(chan struct{})
	var lines bytes.Buffer
	var linesMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			linesMu.Lock()
			lines.WriteString(sc.Text() + "\n")
			linesMu.Unlock()
			if !said && strings.Contains(sc.Text(), "maintenance children ready") {
				said = true
				close(ready)
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case <-ready:
	case err := <-exited:
		linesMu.Lock()
		defer linesMu.Unlock()
		b.Fatalf("serve exited before its children were ready: %v\n%s", err, lines.String())
	case <-time.After(15 * time.Minute):
		b.Fatal("serve's children were not ready within 15 minutes")
	}
	started := time.Since(start)

	serve := cmd.Process.Pid
	kids := children(serve)
	if len(kids) == 0 {
		b.Fatalf("serve (pid %d) runs no maintenance child", serve)
	}
	settled := settleWait(b, kids, settle)
	before := map[int]float64{serve: cpuSeconds(serve)}
	for _, k := range kids {
		before[k] = cpuSeconds(k)
	}
	maxFDs := 0
	// The figures below are read at the end of the window; the children's
	// summed RSS is also sampled each second of it, since a child's
	// resident set grows with each pass's work and shrinks when an idle
	// child gives memory back.
	var maxRSS float64
	t0 := time.Now()
	for time.Since(t0) < window {
		var sum float64
		for _, k := range kids {
			maxFDs = max(maxFDs, fds(k))
			sum += memMB(k, "status", "VmRSS:")
		}
		maxRSS = max(maxRSS, sum)
		time.Sleep(time.Second)
	}
	elapsed := time.Since(t0).Seconds()
	var kidsRSS, kidsPSS, kidsAnon, kidsFile, kidsCPU float64
	for _, k := range kids {
		rss, pss, anon := memMB(k, "status", "VmRSS:"), memMB(k, "smaps_rollup", "Pss:"), memMB(k, "status", "RssAnon:")
		// File-backed resident pages are nearly all the binary's text and
		// read-only data, which every child maps from the one page cache;
		// how many of them a touch maps depends on the kernel (fault-around,
		// large folios: FilePmdMapped counts whole 2 MB mappings).
		file, pmd := memMB(k, "status", "RssFile:"), memMB(k, "smaps_rollup", "FilePmdMapped:")
		cpu, n := cpuSeconds(k)-before[k], fds(k)
		kidsRSS += rss
		kidsPSS += pss
		kidsAnon += anon
		kidsFile += file
		kidsCPU += cpu
		maxFDs = max(maxFDs, n)
		b.Logf("child %d (%s): RSS %.1f MB (anonymous %.1f, file-backed %.1f of which %.0f in 2 MB mappings; proportional %.1f), %.2f%% of a core, %d descriptors",
			k, role(k), rss, anon, file, pmd, pss, 100*cpu/elapsed, n)
	}
	b.ReportMetric(started.Seconds(), "ready_s")
	b.ReportMetric(settled.Seconds(), "settle_s")
	// VmRSS counts the pages of the binary every child maps in each child;
	// Pss shares them out, so its sum is what the children cost together.
	b.ReportMetric(kidsRSS, "children_rss_MB")
	b.ReportMetric(max(maxRSS, kidsRSS), "children_rss_max_MB")
	b.ReportMetric(kidsPSS, "children_pss_MB")
	b.ReportMetric(kidsAnon, "children_anon_MB")
	b.ReportMetric(kidsFile, "children_file_MB")
	b.ReportMetric(100*kidsCPU/elapsed, "children_cpu_%")
	b.ReportMetric(float64(maxFDs), "child_max_fds")
	serveRSS, serveFDs := memMB(serve, "status", "VmRSS:"), fds(serve)
	b.ReportMetric(serveRSS, "serve_rss_MB")
	b.ReportMetric(memMB(serve, "smaps_rollup", "Pss:"), "serve_pss_MB")
	b.ReportMetric(100*(cpuSeconds(serve)-before[serve])/elapsed, "serve_cpu_%")
	b.ReportMetric(float64(serveFDs), "serve_fds")
	// What a thousand idle streams may cost: descriptors per
	// stream in serve, and the resident memory of the whole server.
	b.ReportMetric(float64(serveFDs)/float64(streams), "serve_fds/stream")
	b.ReportMetric(serveRSS+kidsRSS, "total_rss_MB")
	b.Logf("%d streams, %d children; every child ready after %s, settled %s later", streams, len(kids),
		started.Round(time.Millisecond), settled.Round(time.Second))
}

// settledFDs is the most descriptors a settled child holds: with no log
// open a child holds about 10 (standard streams, the ready pipe, the
// runtime's poller), and each open log about 5 more (buffer.db, its WAL
// and index, the lock file), so this allows two open logs, no more.
const settledFDs = 20

// settleWait waits until every child has settled from its start-up (its
// first pass opens every log, and the first flush boundary may too): each
// holds at most settledFDs descriptors, at 5 looks a second apart in a
// row. It gives up after most, saying so, and returns how long it waited.
func settleWait(b *testing.B, kids []int, most time.Duration) time.Duration {
	t0 := time.Now()
	quiet := 0
	for quiet < 5 {
		if time.Since(t0) > most {
			b.Logf("the children had not settled %s after ready; measuring them as they are", most)
			break
		}
		time.Sleep(time.Second)
		quiet++
		for _, k := range kids {
			if fds(k) > settledFDs {
				quiet = 0
			}
		}
	}
	return time.Since(t0)
}

// children returns the pids whose parent is pid.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := statFields(p); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// statFields returns the fields of /proc/<pid>/stat after the command
// name, so field i here is field i+3 of proc(5).
func statFields(pid int) []string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(raw[i+1:]))
}

// cpuSeconds is the process's user plus system time.
func cpuSeconds(pid int) float64 {
	f := statFields(pid)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64) // utime, field 14
	s, _ := strconv.ParseFloat(f[12], 64) // stime, field 15
	return (u + s) / 100                  // USER_HZ is 100 on Linux
}

// memMB reads the field named key (in kB) of /proc/<pid>/<file>, in MB.
func memMB(pid int, file, key string) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// role is the --role on a child's command line.
func role(pid int) string {
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	args := strings.Split(string(raw), "\x00")
	for i, a := range args {
		if a == "--role" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return "?"
}

// fds counts the process's open descriptors.
func fds(pid int) int {
	entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(entries)
}
