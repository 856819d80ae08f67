package logstore

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/hadoop"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/streamcast/streamcast/internal/testkit"
)

// readTableMain is the external reader: a process that knows nothing of
// streamcast but the prefix and the table's name, and reads the table with
// iceberg-go's own catalog and scan. It prints "row <offset> <ts>" for
// every row, then "rows <n>". For an s3:// prefix the endpoint comes from
// AWS_ENDPOINT_URL_S3 and the credentials from the usual AWS variables,
// as for any AWS client.
func readTableMain(out io.Writer, prefix, name string) error {
	ctx := context.Background()
	ns, tbl, ok := strings.Cut(name, ".")
	if !ok {
		return fmt.Errorf("table name %q is not <stream>.<log>", name)
	}
	props := iceberg.Properties{}
	if strings.HasPrefix(prefix, "s3://") {
		props["allow-unsafe-commits"] = "true" // required to open a hadoop catalog on S3, even to read
		props[icebergio.S3EndpointURL] = os.Getenv("AWS_ENDPOINT_URL_S3")
		props[icebergio.S3Region] = os.Getenv("AWS_REGION")
	}
	cat, err := hadoop.NewCatalog("external", prefix, props)
	if err != nil {
		return err
	}
	t, err := cat.LoadTable(ctx, table.Identifier{ns, tbl})
	if err != nil {
		return err
	}
	_, recs, err := t.Scan().ToArrowRecords(ctx)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	n := 0
	for rec, err := range recs {
		if err != nil {
			return err
		}
		offs := rec.Column(rec.Schema().FieldIndices(OffsetColumn)[0]).(*array.Int64)
		ts := rec.Column(rec.Schema().FieldIndices(TSColumn)[0]).(*array.Int64)
		for i := range offs.Len() {
			fmt.Fprintf(w, "row %d %d\n", offs.Value(i), ts.Value(i))
			n++
		}
		rec.Release()
	}
	fmt.Fprintf(w, "rows %d\n", n)
	return w.Flush()
}

// readExternally runs readTableMain in a child process and returns the
// offset → ts it read.
func readExternally(t *testing.T, prefix, name string, env ...string) map[int64]int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=read-table", helperDirEnv+"="+prefix, helperTagEnv+"="+name)
	cmd.Env = append(cmd.Env, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("external reader: %v\n%s", err, stderr.String())
	}
	got := map[int64]int64{}
	total := -1
	for _, line := range strings.Split(strings.TrimSpace(string(outb)), "\n") {
		var off, ts int64
		switch {
		case strings.HasPrefix(line, "row "):
			if _, err := fmt.Sscanf(line, "row %d %d", &off, &ts); err != nil {
				t.Fatalf("external reader said %q", line)
			}
			if _, dup := got[off]; dup {
				t.Fatalf("the external reader got offset %d twice", off)
			}
			got[off] = ts
		case strings.HasPrefix(line, "rows "):
			fmt.Sscanf(line, "rows %d", &total)
		}
	}
	if total != len(got) {
		t.Fatalf("the external reader counted %d rows and printed %d", total, len(got))
	}
	return got
}

// TestAnotherProcessReadsThePublishedTableWithIcebergGo publishes (with a
// compaction swap in between, and snapshots expired) and has a separate
// process read the table with iceberg-go given only the prefix: it gets
// every published row once, with its offset and streamcast_ts.
func TestAnotherProcessReadsThePublishedTableWithIcebergGo(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			l := b.make(t, tierConfig())
			exp := expectation{}
			for range 4 {
				appendTrades(t, l, exp, 8, 25)
				if _, err := l.Seal(ctx, true); err != nil {
					t.Fatal(err)
				}
				if _, err := l.Publish(ctx, true); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := l.Compact(ctx, false); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Publish(ctx, true); err != nil {
				t.Fatal(err)
			}
			appendTrades(t, l, exp, 3, 25) // buffered, unpublished: not in the table
			if _, err := l.CleanPublished(ctx); err != nil {
				t.Fatal(err)
			}
			through, _ := l.PublishedThrough(ctx)
			pt, _ := l.published()
			var env []string
			if !pt.Local() {
				v, _ := s3Servers.Load(l.Dir())
				env = append(env, "AWS_ENDPOINT_URL_S3="+v.(*testkit.S3Server).Endpoint())
			}
			prefix, _, ident := publishedAddress(t, l)
			got := readExternally(t, prefix, ident[0]+"."+ident[1], env...)
			if int64(len(got)) != through || through != 800 {
				t.Fatalf("the external reader got %d rows; published_through is %d (want 800)", len(got), through)
			}
			for off := int64(1); off <= through; off++ {
				ts, ok := got[off]
				if !ok {
					t.Fatalf("the external reader is missing offset %d", off)
				}
				if ts != exp[off].ts {
					t.Fatalf("offset %d: the external reader got ts %d, acknowledged %d", off, ts, exp[off].ts)
				}
			}
		})
	}
}
