package history_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/streamcast/streamcast/pkg/meta/history"
)

func TestUnpublishedCountsTheLiveLogsRowsPastThePublishedEnd(t *testing.T) {
	ctx := context.Background()
	f := migrated(t, false) // [1,401) published, the last log live

	unpublished := func(opts history.Options) (history.Unpublished, bool) {
		t.Helper()
		u, ok, err := f.open(t, opts).Unpublished(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return u, ok
	}
	if u, ok := unpublished(history.Options{}); ok {
		t.Fatalf("everything published: got %+v, want nothing left out", u)
	}

	f.append(t, 40, false) // [401,441) only in the buffer
	if u, ok := unpublished(history.Options{}); !ok || u != (history.Unpublished{From: 401, To: 441, Rows: 40}) {
		t.Fatalf("40 rows buffered: got %+v, %v; want [401,441), 40 rows", u, ok)
	}

	// A cut the caller fixed leaves out what it chose to.
	n := int64(300)
	if u, ok := unpublished(history.Options{AsOfOffset: &n}); ok {
		t.Fatalf("--as-of-offset 300: got %+v, want nothing", u)
	}
	// Read by its metadata alone, the log is not at hand to count.
	uri := "file://" + filepath.Join(f.root, "published", stream, stream+".metadata.json")
	if u, ok := unpublished(history.Options{MetadataURI: uri}); ok {
		t.Fatalf("by metadata URI: got %+v, want nothing", u)
	}

	// Rows published after the Reader pinned its cut are still left out
	// of that cut, and counted.
	r := f.open(t, history.Options{})
	f.append(t, 5, true)
	if u, ok, err := r.Unpublished(ctx); err != nil || !ok || u != (history.Unpublished{From: 401, To: 446, Rows: 45}) {
		t.Fatalf("published after the pin: got %+v, %v, %v; want [401,446), 45 rows", u, ok, err)
	}
	if u, ok := unpublished(history.Options{}); ok {
		t.Fatalf("everything published again: got %+v, want nothing", u)
	}
}
