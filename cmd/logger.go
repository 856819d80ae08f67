package cmd

import (
	"io"
	"os"
	"time"

	"github.com/charmbracelet/log"
	"github.com/muesli/termenv"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

// newLogger builds the logger every command writes to, as the log: section
// says. Its colour profile is decided from the environment alone (NO_COLOR,
// CLICOLOR, CLICOLOR_FORCE, TERM, COLORTERM) and never by asking the
// terminal: see quietFile.
func newLogger(w io.Writer, c config.Log) *log.Logger {
	level, err := log.ParseLevel(c.Level)
	if err != nil {
		level = log.InfoLevel
	}
	opts := log.Options{Level: level, ReportTimestamp: true}
	if c.Format == "json" {
		opts.Formatter = log.JSONFormatter
		opts.TimeFunction = log.NowUTC
		opts.TimeFormat = time.RFC3339Nano
	}
	f, ok := w.(*os.File)
	if !ok {
		return log.NewWithOptions(w, opts) // not a terminal: nothing to ask, no colour
	}
	// Without a profile, termenv decides it from TERM and friends only; it
	// reads no reply from the terminal.
	profile := termenv.NewOutput(f).EnvColorProfile()
	l := log.NewWithOptions(quietFile{f}, opts)
	l.SetColorProfile(profile)
	return l
}

// quietFile hides that a log's writer is a file. charmbracelet/log builds
// its lipgloss renderer with termenv's colour cache, which, on an *os.File
// that is a terminal, writes the OSC 10/11 colour queries and waits up to
// 5 s for each answer: 10 s before the first log line under a
// pseudo-terminal that does not answer (script, some CI runners, some
// multiplexers), NO_COLOR or not. Behind this wrapper termenv sees no
// terminal and asks nothing, and newLogger sets the profile itself.
//
// It is a comparable value so that charmbracelet/log's renderer registry,
// keyed by writer, holds one entry per file rather than one per logger.
type quietFile struct{ f *os.File }

func (q quietFile) Write(p []byte) (int, error) { return q.f.Write(p) }
