package logstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestScanMatchesAppendsWhileSealAndEvictRun appends in this process while
// a maintaining child process seals and evicts, and a goroutine of this
// process does too, and scans random ranges the whole time: every scan
// yields exactly the acknowledged rows of its range.
func TestScanMatchesAppendsWhileSealAndEvictRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Small reads, and scanners that dawdle, so that seals and evictions
	// land in the middle of scans.
	l := createLog(t, schemaAny(), Config{TargetSealBytes: 4 << 10}, withScanChunk(3))
	startHelper(t, "maintain", l.Dir(), "")
	m := openLog(t, l.Dir(), Maintainer, withScanChunk(3))

	var mu sync.Mutex
	exp := expectation{}
	var end int64 = 1
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	wg.Add(1)
	go func() { // the writer
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rows := batch(fmt.Sprintf("w%d", i), 1+i%9)
			first, err := l.Append(ctx, rows, int64(i), nil)
			if err != nil {
				errc <- err
				return
			}
			mu.Lock()
			exp.add(first, int64(i), rows)
			end = first + int64(len(rows))
			mu.Unlock()
		}
	}()
	wg.Add(1)
	go func() { // a second maintainer in this process, racing the child
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := m.Seal(ctx, i%2 == 0); err != nil && !errors.Is(err, ErrBusy) {
				errc <- err
				return
			}
			if _, err := m.Evict(ctx); err != nil && !errors.Is(err, ErrBusy) {
				errc <- err
				return
			}
		}
	}()
	for s := range 3 {
		wg.Add(1)
		go func() { // scanners
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(s), 9))
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				hi := end
				mu.Unlock()
				from := 1 + rng.Int64N(hi)
				if s == 0 { // the dawdler reads the tail, where seals and evictions land
					from = max(1, hi-rng.Int64N(300))
				}
				to := from + rng.Int64N(hi-from+1)
				var got []scanned
				err := l.Scan(ctx, from, to, nil, func(off, ts int64, row []byte) error {
					got = append(got, scanned{off, ts, string(row)})
					if s == 0 && off%16 == 0 {
						time.Sleep(200 * time.Microsecond)
					}
					return nil
				})
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				err = exp.check(got, from, to)
				mu.Unlock()
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	dur := 3 * time.Second
	if testing.Short() {
		dur = time.Second
	}
	// Run for dur, and on past it (up to a minute, for slow -race runs) until
	// at least two files exist, so the scans have had tiers to cross.
	sealedFiles := func() (n int) {
		l.rdb.QueryRow(`SELECT count(*) FROM files`).Scan(&n)
		return n
	}
	minEnd, capEnd := time.Now().Add(dur), time.Now().Add(time.Minute)
	for time.Now().Before(capEnd) && (time.Now().Before(minEnd) || sealedFiles() < 2) {
		select {
		case err := <-errc:
			close(stop)
			wg.Wait()
			t.Fatal(err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	var files, groups int
	l.rdb.QueryRow(`SELECT count(*) FROM files`).Scan(&files)
	l.rdb.QueryRow(`SELECT count(*) FROM groups`).Scan(&groups)
	t.Logf("%d rows, %d files, %d groups still buffered", len(exp), files, groups)
	if files < 2 {
		t.Fatalf("only %d files were sealed: the scans never crossed tiers", files)
	}
	if err := exp.check(scanAll(t, l, 1, end), 1, end); err != nil {
		t.Fatal(err)
	}
}

func TestACorruptFileIsReportedAndNeverServed(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []string{"truncated", "garbled", "missing", "swapped"} {
		t.Run(damage, func(t *testing.T) {
			l := createLog(t, schemaAny(), Config{TargetSealBytes: 1 << 10})
			for i := range 30 {
				if _, err := l.Append(ctx, batch(fmt.Sprint(i), 3), 1, nil); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := l.Seal(ctx, true); err != nil {
				t.Fatal(err)
			}
			var names []string
			rows, _ := l.rdb.Query(`SELECT name FROM files ORDER BY start_offset`)
			for rows.Next() {
				var n string
				rows.Scan(&n)
				names = append(names, n)
			}
			rows.Close()
			if len(names) < 2 {
				t.Fatalf("want several files, got %v", names)
			}
			victim := filepath.Join(l.Dir(), FilesDir, names[1])
			b, err := os.ReadFile(victim)
			if err != nil {
				t.Fatal(err)
			}
			switch damage {
			case "truncated":
				b = b[:len(b)/2]
			case "garbled":
				for i := len(b) / 4; i < len(b)/2; i++ {
					b[i] ^= 0x5a
				}
			case "missing":
				b = nil
			case "swapped": // another file's (valid) contents under this name
				b, _ = os.ReadFile(filepath.Join(l.Dir(), FilesDir, names[0]))
			}
			if b == nil {
				os.Remove(victim)
			} else if err := os.WriteFile(victim, b, 0o644); err != nil {
				t.Fatal(err)
			}
			var vs, ve int64
			l.rdb.QueryRow(`SELECT start_offset, end_offset FROM files WHERE name = ?`, names[1]).Scan(&vs, &ve)
			served := 0
			err = l.Scan(ctx, 1, 91, nil, func(off, ts int64, row []byte) error {
				if off >= vs && off < ve {
					served++
				}
				return nil
			})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), victim) {
				t.Fatalf("scan over a %s file: got %v, want ErrCorrupt naming %s", damage, err, victim)
			}
			if served > 0 {
				t.Fatalf("%d rows of the %s file were served", served, damage)
			}
			err = l.ScanArrow(ctx, vs, ve, func(rec arrowRecord) error {
				t.Fatalf("ScanArrow served a record from a %s file", damage)
				return nil
			})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ScanArrow over a %s file: %v", damage, err)
			}
			// The rows before it are still served.
			if got := scanAll(t, l, 1, vs); len(got) != int(vs-1) {
				t.Fatalf("rows before the damaged file: got %d, want %d", len(got), vs-1)
			}
		})
	}
}

func TestRecoveryUndoesAnInterruptedSeal(t *testing.T) {
	ctx := context.Background()
	l := createLog(t, schemaAny(), Config{TargetSealBytes: 1 << 10})
	exp := expectation{}
	for i := range 10 {
		rows := batch(fmt.Sprint(i), 4)
		first, err := l.Append(ctx, rows, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		exp.add(first, 2, rows)
	}
	// A sealer that died after recording its intent and writing half a file.
	name := "1-21-00112233445566ff.parquet"
	if _, err := l.wconn.ExecContext(ctx, `INSERT INTO seal_intents(name, start_offset, end_offset, created_us) VALUES (?, 1, 21, 0)`, name); err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(l.Dir(), FilesDir, name)
	os.WriteFile(partial, []byte("PAR1 half a file"), 0o644)
	// And a seal-named file nothing mentions.
	stray := filepath.Join(l.Dir(), FilesDir, "21-41-aabbccddeeff0011.parquet")
	os.WriteFile(stray, []byte("PAR1"), 0o644)
	// Files the seal role does not own are left alone.
	other := filepath.Join(l.Dir(), FilesDir, "notes.txt")
	os.WriteFile(other, []byte("mine"), 0o644)

	m := openLog(t, l.Dir(), Maintainer)
	for _, p := range []string{partial, stray} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived recovery: %v", p, err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("recovery removed a file it does not own: %v", err)
	}
	var intents int
	m.rdb.QueryRow(`SELECT count(*) FROM seal_intents`).Scan(&intents)
	if intents != 0 {
		t.Fatalf("%d intents left after recovery", intents)
	}
	os.Remove(other)
	if _, err := m.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	checkFilesDir(t, m)
	checkNoOverlap(t, m)
	if err := exp.check(scanAll(t, m, 1, 41), 1, 41); err != nil {
		t.Fatal(err)
	}
}

func TestSealRefusesWhileAnotherSealerHoldsTheLock(t *testing.T) {
	l := createLog(t, schemaAny(), Config{})
	lk, err := tryLock(filepath.Join(l.Dir(), "seal.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release()
	if _, err := l.Seal(context.Background(), true); !errors.Is(err, ErrBusy) {
		t.Fatalf("Seal while seal.lock is held: %v, want ErrBusy", err)
	}
}

func TestSealCutsOnlyAtGroupBoundaries(t *testing.T) {
	ctx := context.Background()
	l := createLog(t, schemaAny(), Config{TargetSealBytes: 500})
	var bounds = map[int64]bool{1: true}
	for i := range 20 {
		first, err := l.Append(ctx, batch(fmt.Sprint(i), 1+i%6), 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		bounds[first+int64(1+i%6)] = true
	}
	n, err := l.Seal(ctx, false)
	if err != nil || n == 0 {
		t.Fatalf("Seal = %d, %v", n, err)
	}
	rows, _ := l.rdb.Query(`SELECT start_offset, end_offset FROM files`)
	defer rows.Close()
	for rows.Next() {
		var s, e int64
		rows.Scan(&s, &e)
		if !bounds[s] || !bounds[e] {
			t.Fatalf("file [%d,%d) cuts a commit group", s, e)
		}
	}
	_, end, _ := l.Extent(ctx)
	var buffered int64
	l.rdb.QueryRow(`SELECT coalesce(sum(n),0) FROM groups WHERE first >= (SELECT max(end_offset) FROM files)`).Scan(&buffered)
	if buffered == 0 || n+buffered != end-1 {
		t.Fatalf("an unflushed seal sealed %d and left %d of %d rows; it should leave the partial target", n, buffered, end-1)
	}
}

// TestAScanFindsRowsEvictedUnderItInTheNewFile seals and evicts the very
// rows a scan is about to read from the buffer: the scan must find them in
// the file that now holds them, once each.
func TestAScanFindsRowsEvictedUnderItInTheNewFile(t *testing.T) {
	ctx := context.Background()
	l := createLog(t, schemaAny(), Config{}, withScanChunk(1))
	m := openLog(t, l.Dir(), Maintainer, withScanChunk(1))
	exp := expectation{}
	for g := range 10 {
		rows := batch(fmt.Sprint(g), 3)
		first, err := l.Append(ctx, rows, int64(g), nil)
		if err != nil {
			t.Fatal(err)
		}
		exp.add(first, int64(g), rows)
	}
	var got []scanned
	err := l.Scan(ctx, 2, 31, nil, func(off, ts int64, row []byte) error {
		got = append(got, scanned{off, ts, string(row)})
		if off == 2 { // the scan holds group 1 in hand; seal and evict all
			if n, err := m.Seal(ctx, true); err != nil || n != 30 {
				return fmt.Errorf("seal under the scan: %d, %v", n, err)
			}
			if n, err := m.Evict(ctx); err != nil || n != 30 {
				return fmt.Errorf("evict under the scan: %d, %v", n, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.check(got, 2, 31); err != nil {
		t.Fatal(err)
	}
}
