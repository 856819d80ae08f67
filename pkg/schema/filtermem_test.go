package schema

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
)

// Bounds on what a where= filter of n bytes may cost, whatever its shape:
// a server holds one compiled filter per distinct filter its subscribers
// send (64 KiB each by default), so a filter that held or allocated much
// more than its own size would let a few subscribers take the server's
// memory.
const (
	maxFilterHeldPerByte  = 8 // Size() ≤ 8 × len + filterHeldSlack
	filterHeldSlack       = 512
	maxFilterAllocPerByte = 16 // bytes allocated by CompileFilter ≤ 16 × len + filterAllocSlack
	filterAllocSlack      = 64 << 10
)

// allocated reports the bytes the process allocated while fn ran.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// retained reports the heap bytes that what fn returns keeps reachable.
func retained(fn func() any) (uint64, any) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := fn()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc), v
}

// TestACompiledFilterHoldsEachValueAboutOnce: a 64 KiB list of 5,000
// ten-byte strings compiles to a filter that keeps under 1.35 times its
// JSON by Size (1.27 when written: the echo, and a table of 3.2 bytes a
// value), and under 1.6 times as the heap shows it (1.4, the allocator
// rounding the echo up to whole 8 KiB pages), with or without a schema.
func TestACompiledFilterHoldsEachValueAboutOnce(t *testing.T) {
	where := stringList("trade_id", 5000, 1)
	for _, sch := range []*Schema{mustCompile(t, tradeSchema), Any()} {
		// Twenty of them, so the heap's count is not noise.
		const n = 20
		all, v := retained(func() any {
			fs := make([]*Filter, n)
			for i := range fs {
				f, err := sch.CompileFilter(where)
				if err != nil {
					t.Fatal(err)
				}
				fs[i] = f
			}
			return fs
		})
		held := all / n
		f := v.([]*Filter)[0]
		size := f.Size()
		t.Logf("schema %v: a %d-byte filter of 5,000 strings holds %d bytes by Size (%.2f×), %d by the heap (%.2f×)",
			!sch.IsAny(), len(where), size, float64(size)/float64(len(where)), held, float64(held)/float64(len(where)))
		if size > len(where)*135/100 {
			t.Errorf("Size() = %d, over 1.35 × the filter's %d bytes", size, len(where))
		}
		// The heap's count includes the allocator's rounding.
		if held > uint64(len(where))*16/10 {
			t.Errorf("the compiled filter keeps %d bytes of heap, over 1.6 × the filter's %d bytes", held, len(where))
		}
		if int(held) > size+size/4+8192 {
			t.Errorf("the heap shows %d bytes held, Size() says %d: Size undercounts", held, size)
		}
	}
}

// TestCompilingAFilterAllocatesAboutItsSize: compiling a 60,000-value list
// allocates a small multiple of its size, not a tree node per value.
func TestCompilingAFilterAllocatesAboutItsSize(t *testing.T) {
	s := mustCompile(t, tradeSchema)
	where := inList(60000)
	n := allocated(func() {
		if _, err := s.CompileFilter(where); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("compiling %d bytes allocated %d (%.1f×)", len(where), n, float64(n)/float64(len(where)))
	if n > uint64(len(where))*6 {
		t.Errorf("compiling %d bytes allocated %d, over 6 × its size", len(where), n)
	}
}

// FuzzCompileFilterMemory compiles arbitrary where= text of up to 64 KiB,
// with and without a schema: the filter it gives holds at most
// maxFilterHeldPerByte times the input's size (and a fixed slack), and
// compiling it, accepted or refused, allocates at most
// maxFilterAllocPerByte times.
func FuzzCompileFilterMemory(f *testing.F) {
	f.Add(stringList("s", 5000, 1))
	f.Add(inList(6000))
	var b bytes.Buffer
	b.WriteString(`{"i":[`)
	for i := 1; b.Len() < 60000; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i%9+1) + "e" + strconv.Itoa(10+i%9))
	}
	b.WriteString(`]}`)
	f.Add(b.Bytes())
	s := mustCompile(f, fuzzSchema)
	f.Fuzz(func(t *testing.T, where []byte) {
		if len(where) > 64<<10 {
			return
		}
		for _, sch := range []*Schema{s, Any()} {
			var flt *Filter
			n := allocated(func() { flt, _ = sch.CompileFilter(where) })
			if max := uint64(maxFilterAllocPerByte*len(where) + filterAllocSlack); n > max {
				t.Fatalf("compiling %d bytes (schema %v) allocated %d, over %d", len(where), !sch.IsAny(), n, max)
			}
			if flt == nil {
				continue
			}
			if size, max := flt.Size(), maxFilterHeldPerByte*len(where)+filterHeldSlack; size > max {
				t.Fatalf("%d bytes (schema %v) compiled to a filter of %d bytes, over %d: %.200q", len(where), !sch.IsAny(), size, max, where)
			}
		}
	})
}
