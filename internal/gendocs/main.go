package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/streamcast/streamcast/cmd"
)

// manDate is the date every man page carries. Pages are compared byte for
// byte with their committed copies, so it cannot be today.
var manDate = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

func main() {
	dir := flag.String("dir", ".", "write completions/ and man/ under this `directory`")
	flag.Parse()
	if err := generate(*dir); err != nil {
		fmt.Fprintf(os.Stderr, "gendocs: %v\n", err)
		os.Exit(1)
	}
}

// generate writes dir/completions and dir/man, replacing what was there.
func generate(dir string) error {
	root := cmd.NewRootCommand(bytes.NewReader(nil), io.Discard, io.Discard)
	disableAutoGenTag(root)

	completions := filepath.Join(dir, "completions")
	man := filepath.Join(dir, "man")
	for _, d := range []string{completions, man} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}

	shells := []struct {
		file string
		gen  func(io.Writer) error
	}{
		{"streamcast.bash", func(w io.Writer) error { return root.GenBashCompletionV2(w, true) }},
		{"streamcast.zsh", root.GenZshCompletion},
		{"streamcast.fish", func(w io.Writer) error { return root.GenFishCompletion(w, true) }},
		{"streamcast.ps1", root.GenPowerShellCompletionWithDesc},
	}
	for _, s := range shells {
		var buf bytes.Buffer
		if err := s.gen(&buf); err != nil {
			return fmt.Errorf("%s: %w", s.file, err)
		}
		if err := os.WriteFile(filepath.Join(completions, s.file), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}

	header := &doc.GenManHeader{
		Section: "1",
		Date:    &manDate,
		Source:  "streamcast",
		Manual:  "streamcast manual",
	}
	if err := doc.GenManTree(root, header, man); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	return nil
}

// disableAutoGenTag drops cobra's "Auto generated" footer, which carries a
// date of its own.
func disableAutoGenTag(c *cobra.Command) {
	c.DisableAutoGenTag = true
	for _, sub := range c.Commands() {
		disableAutoGenTag(sub)
	}
}
