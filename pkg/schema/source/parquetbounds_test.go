package source

import (
	"bytes"
	"encoding/binary"
	"os"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// zigzagVarint appends v as a Thrift compact protocol i64: zigzag, then varint.
func zigzagVarint(v int64) []byte {
	return binary.AppendUvarint(nil, uint64(v<<1)^uint64(v>>63))
}

// TestParquetChunkPastTheFileCostsNoMemory: a Parquet file of a few
// kilobytes whose footer says a column chunk holds 800 MB is refused
// without allocating them. arrow-go allocates a chunk's declared length
// before reading it (and, for a struct's fields, on goroutines of its
// own, where a negative length's panic kills the process: the seed
// chunk-length-past-file of FuzzParquet).
func TestParquetChunkPastTheFileCostsNoMemory(t *testing.T) {
	rec := fromJSON(t, wideSchema(), wideRows)
	defer rec.Release()
	good, err := os.ReadFile(writeParquet(t, rec, 1))
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := pf.MetaData().RowGroup(0).ColumnChunk(0)
	if err != nil {
		t.Fatal(err)
	}
	// ColumnMetaData's fields 6 and 7, total_uncompressed_size and
	// total_compressed_size, each an i64 one field after the last
	// (header byte 0x16).
	footerLen := int(binary.LittleEndian.Uint32(good[len(good)-8:]))
	footerAt := len(good) - 8 - footerLen
	sizes := append(append([]byte{0x16}, zigzagVarint(cc.TotalUncompressedSize())...), 0x16)
	old := append(bytes.Clone(sizes), zigzagVarint(cc.TotalCompressedSize())...)
	at := bytes.Index(good[footerAt:], old)
	if at < 0 {
		t.Fatal("the test's own file: column 0's sizes are not where the test looks for them")
	}
	const claim = 800 << 20
	footer := bytes.Replace(good[footerAt:len(good)-8], old, append(sizes, zigzagVarint(claim)...), 1)
	data := append(bytes.Clone(good[:footerAt]), footer...)
	data = binary.LittleEndian.AppendUint32(data, uint32(len(footer)))
	data = append(data, "PAR1"...)
	if pf, err := file.NewParquetReader(bytes.NewReader(data)); err != nil {
		t.Fatalf("the damaged footer does not parse: %v", err)
	} else if cc, _ := pf.MetaData().RowGroup(0).ColumnChunk(0); cc.TotalCompressedSize() != claim {
		t.Fatalf("the damaged footer claims %d bytes, not %d", cc.TotalCompressedSize(), claim)
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = readToEnd(t, Parquet, data)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("reading %d bytes allocated %d MB; err %v", len(data), got>>20, err)
	}
	if err == nil {
		t.Fatal("read whole, want it refused as damaged")
	}
	t.Log(err)
}
