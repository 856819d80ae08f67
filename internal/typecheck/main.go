package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// listed is the part of `go list -json` typecheck reads.
type listed struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles    []string
	CgoFiles   []string
	ImportMap  map[string]string
	Module     *struct{ Main bool }
	Error      *struct{ Err string }
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: GOOS=os GOARCH=arch typecheck PACKAGE...")
		os.Exit(2)
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "typecheck:", err)
		os.Exit(1)
	}
}

func run(patterns []string) error {
	pkgs, err := list(patterns)
	if err != nil {
		return err
	}
	// Read now, not from go/build's Default (fixed at start-up), so a
	// caller that sets GOOS for go list is checked with its sizes.
	goos, goarch := env("GOOS", runtime.GOOS), env("GOARCH", runtime.GOARCH)
	sizes := types.SizesFor("gc", goarch)
	if sizes == nil {
		return fmt.Errorf("GOARCH=%s: not an architecture the gc toolchain knows", goarch)
	}
	fset := token.NewFileSet()
	checked := map[string]*types.Package{"unsafe": types.Unsafe}
	var failed []string
	for _, p := range pkgs {
		if p.ImportPath == "unsafe" {
			continue
		}
		if p.Error != nil {
			return fmt.Errorf("%s for %s/%s: %s", p.ImportPath, goos, goarch, p.Error.Err)
		}
		if len(p.CgoFiles) > 0 {
			return fmt.Errorf("%s has cgo files for %s/%s: the release builds are pure Go, so run with CGO_ENABLED=0", p.ImportPath, goos, goarch)
		}
		own := p.Module != nil && p.Module.Main
		files, err := parse(fset, p)
		if err != nil {
			return err
		}
		var errs []error
		conf := types.Config{
			Importer:         importer{p, checked},
			Sizes:            sizes,
			IgnoreFuncBodies: !own,
			Error:            func(err error) { errs = append(errs, err) },
		}
		pkg, _ := conf.Check(p.ImportPath, fset, files, nil)
		for _, err := range errs {
			failed = append(failed, err.Error())
		}
		if len(failed) > 20 {
			break
		}
		checked[p.ImportPath] = pkg
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s/%s does not type-check:\n  %s", goos, goarch, strings.Join(failed, "\n  "))
	}
	fmt.Printf("typecheck: %d packages type-check for %s/%s\n", len(pkgs), goos, goarch)
	return nil
}

// list runs `go list -deps -json` in the target's environment, which
// returns every package before the packages that import it.
func list(patterns []string) ([]listed, error) {
	cmd := exec.Command("go", append([]string{"list", "-e", "-deps", "-json=ImportPath,Dir,Standard,GoFiles,CgoFiles,ImportMap,Module,Error"}, patterns...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("read go list's output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

func parse(fset *token.FileSet, p listed) ([]*ast.File, error) {
	files := make([]*ast.File, 0, len(p.GoFiles))
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// importer resolves an import of one package to a package checked before
// it, through the package's import map (the standard library's vendored
// copies).
type importer struct {
	from    listed
	checked map[string]*types.Package
}

func (im importer) Import(path string) (*types.Package, error) {
	if mapped, ok := im.from.ImportMap[path]; ok {
		path = mapped
	}
	if pkg, ok := im.checked[path]; ok && pkg != nil {
		return pkg, nil
	}
	return nil, fmt.Errorf("%s imports %s, which go list did not list before it", im.from.ImportPath, path)
}

func env(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}
