package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestALinuxOnlyCallFailsTheOtherTargetsByName type-checks a small module
// whose one file, built everywhere, calls flock: it passes for Linux and
// darwin and fails for windows, naming the call.
func TestALinuxOnlyCallFailsTheOtherTargetsByName(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/locker\n\ngo 1.22\n")
	write("main.go", `package main

import "syscall"

func main() { _ = syscall.Flock(0, syscall.LOCK_EX) }
`)
	t.Chdir(dir)
	t.Setenv("CGO_ENABLED", "0")
	t.Setenv("GOFLAGS", "-mod=mod")
	for _, tc := range []struct {
		goos, goarch string
		wrong        string // "" when the target type-checks
	}{
		{"linux", "arm64", ""},
		{"darwin", "arm64", ""},
		{"windows", "amd64", "undefined: syscall.Flock"},
	} {
		t.Run(tc.goos+"/"+tc.goarch, func(t *testing.T) {
			t.Setenv("GOOS", tc.goos)
			t.Setenv("GOARCH", tc.goarch)
			err := run([]string{"."})
			switch {
			case tc.wrong == "" && err != nil:
				t.Fatalf("want it to type-check, got %v", err)
			case tc.wrong != "" && err == nil:
				t.Fatalf("want %q, got no error", tc.wrong)
			case tc.wrong != "" && !strings.Contains(err.Error(), tc.wrong):
				t.Fatalf("want an error naming %q, got %v", tc.wrong, err)
			}
		})
	}
}
