package idlecost

import (
	"bufio"
	"bytes"
	"cmp"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkProcessInit reports what the package initialisers linked into
// the streamcast binary cost every process that runs it, serve and each
// maintenance child alike, before any of its own work: their summed clock
// time (init_ms) and the bytes and objects they allocate (init_alloc_MB,
// init_allocs), read from the runtime's GODEBUG=inittrace=1 lines of
// `streamcast version`. It logs the packages that allocate most: the
// children's resident memory when idle is mostly this start-up cost (the
// code it touches and the heap it leaves), not anything per log.
//
//	go test ./internal/testkit/idlecost -run '^$' -bench ProcessInit -benchtime 3x
func BenchmarkProcessInit(b *testing.B) {
	bin := binary(b)
	var total pkgInit
	var last []pkgInit
	for range b.N {
		cmd := exec.Command(bin, "version")
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("%s version: %v\n%s", bin, err, out)
		}
		last = parseInitTrace(out)
		if len(last) == 0 {
			b.Fatalf("%s version printed no inittrace line:\n%s", bin, out)
		}
		for _, p := range last {
			total.ms += p.ms
			total.bytes += p.bytes
			total.allocs += p.allocs
		}
	}
	n := float64(b.N)
	b.ReportMetric(total.ms/n, "init_ms")
	b.ReportMetric(float64(total.bytes)/n/(1<<20), "init_alloc_MB")
	b.ReportMetric(float64(total.allocs)/n, "init_allocs")
	slices.SortFunc(last, func(x, y pkgInit) int { return cmp.Compare(y.bytes, x.bytes) })
	for _, p := range last[:min(8, len(last))] {
		b.Logf("init %s: %.1f ms, %.1f MB in %d allocations", p.pkg, p.ms, float64(p.bytes)/(1<<20), p.allocs)
	}
	b.Logf("%d packages run an initialiser", len(last))
}

// pkgInit is one package's line of GODEBUG=inittrace=1.
type pkgInit struct {
	pkg           string
	ms            float64
	bytes, allocs int64
}

// parseInitTrace reads the runtime's inittrace lines, each
//
//	init PKG @START ms, CLOCK ms clock, BYTES bytes, ALLOCS allocs
//
// and skips any other line.
func parseInitTrace(out []byte) []pkgInit {
	var pkgs []pkgInit
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(strings.ReplaceAll(sc.Text(), ",", ""))
		if len(f) != 11 || f[0] != "init" || f[6] != "clock" || f[8] != "bytes" || f[10] != "allocs" {
			continue
		}
		ms, err1 := strconv.ParseFloat(f[4], 64)
		by, err2 := strconv.ParseInt(f[7], 10, 64)
		al, err3 := strconv.ParseInt(f[9], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		pkgs = append(pkgs, pkgInit{pkg: f[1], ms: ms, bytes: by, allocs: al})
	}
	return pkgs
}

// TestParseInitTrace: the runtime's inittrace line as Go prints it, and
// nothing from a line of another shape.
func TestParseInitTrace(t *testing.T) {
	out := []byte("init internal/bytealg @0.003 ms, 0 ms clock, 0 bytes, 0 allocs\n" +
		"streamcast v1.2.3\n" +
		"init github.com/apache/iceberg-go/table/substrait @36 ms, 194 ms clock, 32633504 bytes, 534171 allocs\n")
	got := parseInitTrace(out)
	want := []pkgInit{
		{pkg: "internal/bytealg"},
		{pkg: "github.com/apache/iceberg-go/table/substrait", ms: 194, bytes: 32633504, allocs: 534171},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("parseInitTrace:\n got %+v\nwant %+v", got, want)
	}
}
