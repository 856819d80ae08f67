package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/charmbracelet/log"
	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// Exit codes of Run and Execute.
const (
	ExitOK      = 0 // the command did what was asked
	ExitFailure = 1 // it tried and failed; the error is on stderr
	ExitUsage   = 2 // it was asked wrongly: unknown command or flag, bad flag value, wrong arguments
)

// app is what every subcommand receives from the root: the configuration,
// the logger and the process's standard streams. Commands write to a.stdout
// and a.stderr, never to os.Stdout, so tests and testscript see everything.
//
// The configuration is one config.Config (every section: listen, root,
// limits, streams, maintain, published, s3, tiers, log), resolved once per
// run by the root's PersistentPreRunE into a.cfg with config.Resolve: the
// config file laid over config.Embedded, then STREAMCAST_* environment
// variables, then the running command's flags, each overriding the one
// before, for every key alike. A command uses a.cfg and never reads a
// flag's variable for a key directly, which would skip the environment and
// the file.
//
// To give a key a flag, declare the flag with the key's default and mark it
// as that key's command-line form:
//
//	def := config.Default()
//	cmd.Flags().String("listen", def.Listen, "address to listen on")
//	config.MarkFlag(cmd.Flags(), "listen", "listen")
//
// (config.MarkSwitch marks a boolean flag that sets a key to a fixed value,
// as --no-maintain sets maintain to false.) Every key but streams has its
// environment variable without any marking (config.EnvVar: STREAMCAST_ and
// the key in upper case with "." and "-" turned into "_"). A new key is a
// field of config.Config or one of its sections, with a yaml tag, a default
// beside it and a check in its Validate; nothing in cmd needs to change.
//
// Flags are bound only for the command that runs, so two commands may mark
// flags for the same key. Subcommands must not set PersistentPreRun(E)
// themselves: cobra runs only the nearest one, and the root's reads the
// configuration.
type app struct {
	logger *log.Logger // text at info until the root's PersistentPreRunE builds the configured one
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	configFile string         // --config
	configUsed string         // the file actually read ("" when none)
	cmd        *cobra.Command // the command running, whose flags config.Resolve reads
	cfg        config.Config  // the configuration read at start (setup); only the log: section is validated
}

// NewRootCommand builds the whole streamcast command tree, reading from stdin
// and writing to stdout and stderr. Each call returns a fresh tree with its
// own configuration; Run uses one per invocation, and the doc generator and
// tests build their own.
func NewRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	a := &app{
		logger: newLogger(stderr, config.DefaultLog()),
		stdin:  stdin,
		stdout: stdout,
		stderr: stderr,
	}
	root := &cobra.Command{
		Use:   "streamcast",
		Short: "A durable WebSocket stream broker",
		Long: `streamcast serves durable WebSocket streams. Each row a publisher sends is
validated against the stream's JSON Schema and written to disk (fsync) before
any subscriber sees it. Rows carry offsets, so a subscriber resumes exactly
where it stopped. History moves from a SQLite buffer to Parquet files that
form an Apache Iceberg table.

Configuration comes from a YAML file (` + "`--config`, `$STREAMCAST_CONFIG`" + ` or
` + "`./streamcast.yaml`" + `), then ` + "`STREAMCAST_*`" + ` environment variables, then
flags; each overrides the one before (see "streamcast config"). Exit codes:
0 success, 1 failure, 2 usage error.`,
		SilenceUsage:      true, // a usage error is one line and a pointer to --help (printUsageError)
		SilenceErrors:     true, // Run prints every error once
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return a.setup(cmd) },
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(flagError)

	def := config.DefaultLog()
	logLevels, logFormats := config.LogLevels(), config.LogFormats()
	pf := root.PersistentFlags()
	pf.StringVar(&a.configFile, logstore.FlagConfig, "", "read configuration from the YAML `FILE` (default $STREAMCAST_CONFIG, else ./streamcast.yaml if it exists)")
	pf.Var(newChoice("level", def.Level, logLevels), logstore.FlagLogLevel, "log messages at this `level` and above: "+strings.Join(logLevels, ", "))
	pf.Var(newChoice("format", def.Format, logFormats), logstore.FlagLogFormat, "log line `format`: "+strings.Join(logFormats, ", "))
	config.MarkFlag(pf, logstore.FlagLogLevel, "log.level")
	config.MarkFlag(pf, logstore.FlagLogFormat, "log.format")
	_ = root.MarkPersistentFlagFilename(logstore.FlagConfig, "yaml", "yml")
	_ = root.RegisterFlagCompletionFunc(logstore.FlagLogLevel, cobra.FixedCompletions(logLevels, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc(logstore.FlagLogFormat, cobra.FixedCompletions(logFormats, cobra.ShellCompDirectiveNoFileComp))

	// The subcommands: one file and one constructor each (cmd/serve.go:
	// func newServeCmd(a *app) *cobra.Command), one line each here. A command
	// that takes positional arguments sets Args (strictArgs below); after
	// adding or changing one, run go generate ./... for the man pages. In
	// Long texts, put names with underscores in backquotes (`STREAMCAST_X`):
	// the man pages read them as Markdown.
	root.AddCommand(
		newVersionCmd(a),
		newAuthCmd(a),
		newConfigCmd(a),
		newServeCmd(a),
		newBenchCmd(a),
		newMaintainCmd(a),
		newReplicateCmd(a),
		newTailCmd(a),
		newPublishCmd(a),
		newMigrateCmd(a),
		newRetireCmd(a),
		newRestoreCmd(a),
		newRetainCmd(a),
		newIngestCmd(a),
		newControlCmd(a),
		newStreamsCmd(a),
		newDescribeCmd(a),
		newSnapshotCmd(a),
		newSQLCmd(a),
	)

	root.InitDefaultCompletionCmd() // now, so the man pages and strictArgs see it
	strictArgs(root)
	return root
}

// Run runs streamcast with args (without the program name) and returns the
// exit code. Errors are printed once to stderr as "streamcast: <error>"; a
// usage error as "streamcast CMD: <error>; see 'streamcast CMD --help'".
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := NewRootCommand(stdin, stdout, stderr)
	root.SetArgs(args)
	c, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	if ue := (usageError{}); errors.As(err, &ue) || flagRuleError(err) {
		if c == nil {
			c = root
		}
		printUsageError(stderr, c, err)
		return ExitUsage
	}
	fmt.Fprintf(stderr, "streamcast: %v\n", err)
	return ExitFailure
}

// Execute runs streamcast with the process's arguments and standard streams
// and returns the exit code for os.Exit. The context it passes to commands
// is cancelled by the first SIGINT or SIGTERM, so a command can shut down
// cleanly; a second signal kills the process the usual way.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // restore default handling: a second Ctrl-C must still be able to kill a stuck shutdown
	}()
	return Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// strictArgs makes every argument mistake in the tree a usage error. A
// command that declares Args keeps its check, wrapped; a command with
// subcommands refuses an unknown one (cobra would print help and exit 0 for
// a command that cannot run, and never check its arguments); any other
// command takes no arguments. Set Args (cobra.ExactArgs, …) on commands that
// take positional arguments.
func strictArgs(c *cobra.Command) {
	switch {
	case c.HasSubCommands():
		c.Args = unknownSubcommand
		if !c.Runnable() {
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	case c.Args != nil:
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	default:
		if c.ValidArgsFunction == nil {
			c.ValidArgsFunction = cobra.NoFileCompletions // no argument to complete, least of all a file
		}
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("takes no arguments, got %q", args[0])}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		strictArgs(sub)
	}
}

// unknownSubcommand refuses the first argument of a command that only has
// subcommands, suggesting the nearest names.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default, applied only on its legacy path
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		return usageError{fmt.Errorf("unknown command %q (did you mean %q?)", args[0], s[0])}
	}
	return usageError{fmt.Errorf("unknown command %q", args[0])}
}
