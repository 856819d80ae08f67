package cmd

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

func TestMaintainRefusesMissingFlags(t *testing.T) {
	for _, args := range [][]string{
		{"maintain", "--every", "1s", "--log", "x"},
		{"maintain", "--role", "seal", "--every", "1s"},
		{"maintain", "--role", "compact", "--log", "x"},
		{"maintain", "--role", "seal", "--every", "0s", "--log", "x"},
	} {
		code, _, stderr := run(t, args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d; stderr:\n%s", args, code, ExitUsage, stderr)
		}
	}
}

func TestMaintainSealsAndCleansUntilCancelled(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s", "log")
	l, err := logstore.Create(dir, schema.Any(), logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if _, err := l.Append(ctx, [][]byte{[]byte(`{"a":1}`), []byte(`{"a":2}`)}, 1, nil); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	t.Setenv(configEnv, "")
	for _, role := range []string{"seal", "clean"} {
		rctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
		var out, errOut bytes.Buffer
		code := Run(rctx, []string{"maintain", "--role", role, "--every", "50ms", "--flush-every", "100ms", "--log", dir}, strings.NewReader(""), &out, &errOut)
		cancel()
		if code != ExitOK {
			t.Fatalf("maintain --role %s: exit %d; stderr:\n%s", role, code, errOut.String())
		}
	}
	var rows []string
	err = l.Scan(ctx, 1, 3, nil, func(off, ts int64, row []byte) error {
		rows = append(rows, string(row))
		return nil
	})
	if err != nil || strings.Join(rows, " ") != `{"a":1} {"a":2}` {
		t.Fatalf("after maintain: %v, %v", rows, err)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "files", "*.parquet"))
	if len(entries) != 1 {
		t.Fatalf("maintain --role seal left %v in files/", entries)
	}
}
