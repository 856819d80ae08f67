package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCommittedDocsAreCurrent regenerates the completions and man pages and
// compares them with the committed copies at the repository root.
func TestCommittedDocsAreCurrent(t *testing.T) {
	fresh := t.TempDir()
	if err := generate(fresh); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"completions", "man"} {
		want := readDir(t, filepath.Join(fresh, dir))
		got := readDir(t, filepath.Join("..", "..", dir))
		for name, w := range want {
			g, ok := got[name]
			switch {
			case !ok:
				t.Errorf("%s/%s is missing; run go generate ./... and commit the result", dir, name)
			case !bytes.Equal(g, w):
				t.Errorf("%s/%s is stale; run go generate ./... and commit the result", dir, name)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s/%s is no longer generated; run go generate ./... (it removes it) and commit the result", dir, name)
			}
		}
	}
}

// TestGenerateIsDeterministic guards the comparison above: two runs must
// write the same bytes, or the test would fail on a clean tree.
func TestGenerateIsDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := generate(a); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1") // must not matter: the date is fixed
	if err := generate(b); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"completions", "man"} {
		fa, fb := readDir(t, filepath.Join(a, dir)), readDir(t, filepath.Join(b, dir))
		if len(fa) == 0 {
			t.Fatalf("%s: nothing generated", dir)
		}
		for name, data := range fa {
			if !bytes.Equal(data, fb[name]) {
				t.Errorf("%s/%s differs between two runs", dir, name)
			}
		}
	}
}

func TestEveryCommandHasAManPage(t *testing.T) {
	dir := t.TempDir()
	if err := generate(dir); err != nil {
		t.Fatal(err)
	}
	pages := readDir(t, filepath.Join(dir, "man"))
	for _, want := range []string{"streamcast.1", "streamcast-version.1", "streamcast-config.1", "streamcast-completion-bash.1"} {
		if _, ok := pages[want]; !ok {
			names := make([]string, 0, len(pages))
			for n := range pages {
				names = append(names, n)
			}
			slices.Sort(names)
			t.Errorf("no man/%s; generated %v", want, names)
		}
	}
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%v; run go generate ./... and commit the result", err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	return files
}
