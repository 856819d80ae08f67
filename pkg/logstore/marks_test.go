package logstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

// TestPublishRemovesTheMarksCopyAKilledPassLeft: a publish pass writes the
// marks to a local file before it uploads them; one SIGKILLed between the
// two leaves that file in the log's files directory, where nothing records
// it. The next pass removes it, so a log's directory holds only what its
// records name (the crash test's check caught it under STREAMCAST_SOAK).
func TestPublishRemovesTheMarksCopyAKilledPassLeft(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	lg, err := logstore.Create(filepath.Join(root, "s", "s"), schema.Any(),
		logstore.Config{Stream: "s", Log: "s", Published: filepath.Join(root, "pub")})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	if _, err := lg.Append(ctx, [][]byte{[]byte(`{"i":1}`)}, 1, nil); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(lg.FilesDir(), ".marks-killed.json")
	if err := os.MkdirAll(lg.FilesDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("%s is still there after a publish pass (%v)", stale, err)
	}
}
