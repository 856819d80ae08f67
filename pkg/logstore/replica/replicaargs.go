// The command line of `streamcast replicate`, the child serve runs to ship
// its logs' WAL: the type, its flags, its rendering and its parser, and
// nothing of the replicator. serve renders it and the command reads it
// back, so both take it from this one file.

package replica

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// Defaults of the cadence, chosen for the RPO they imply: a row committed
// just after a round is shipped by the next, so a lost machine loses at
// most about SyncInterval of acknowledged rows that are not yet published.
// The replicator's options fall back to them too.
const (
	DefaultSyncInterval      = 500 * time.Millisecond
	DefaultSnapshotInterval  = time.Hour
	DefaultSnapshotRetention = 24 * time.Hour
)

// Args is the command line of `streamcast replicate`: the logs and the
// cadence. serve renders it for its replicate child with Args; the command
// reads it back through Flags. The flag names live here only, so a rename
// fails to compile on both sides rather than failing serve's child.
type Args struct {
	Logs []string // the directories of the logs to replicate
	// Destination is where the replicas go, as warehouse.Parse reads it
	// (s3://bucket/path, file:///dir or a directory): the replica of log
	// L of stream S at <Destination>/S/L/. Empty means beside each log's
	// published tables, <published>/S/_wal/L/.
	Destination string
	// S3 reaches an s3:// Destination; credentials never go on a command
	// line, they come from the AWS environment.
	S3                warehouse.S3
	SyncInterval      time.Duration // replica.Options.SyncInterval
	SnapshotInterval  time.Duration // replica.Options.SnapshotInterval
	SnapshotRetention time.Duration // replica.Options.SnapshotRetention
	ReadyFD           int           // the descriptor "ready" is written to; 0 means none
}

// Command is the subcommand's name.
const Command = "replicate"

// The flag names of Args; only this file spells them.
const (
	FlagLog               = "log"
	FlagReadyFD           = "ready-fd"
	FlagDestination       = "destination"
	flagS3Endpoint        = "s3-endpoint"
	flagS3Region          = "s3-region"
	flagS3PathStyle       = "s3-path-style"
	flagSyncInterval      = "sync-interval"
	flagSnapshotInterval  = "snapshot-interval"
	flagSnapshotRetention = "snapshot-retention"
)

// DefaultArgs returns the command line's defaults.
func DefaultArgs() Args {
	return Args{SyncInterval: DefaultSyncInterval, SnapshotInterval: DefaultSnapshotInterval, SnapshotRetention: DefaultSnapshotRetention}
}

// Args renders a as arguments of `streamcast replicate`, in a form
// ParseArgs reads back to a.
func (a Args) Args() []string {
	out := []string{
		"--" + flagSyncInterval, a.SyncInterval.String(),
		"--" + flagSnapshotInterval, a.SnapshotInterval.String(),
		"--" + flagSnapshotRetention, a.SnapshotRetention.String(),
	}
	if a.ReadyFD != 0 {
		out = append(out, "--"+FlagReadyFD, strconv.Itoa(a.ReadyFD))
	}
	if a.Destination != "" {
		out = append(out, "--"+FlagDestination, a.Destination)
	}
	if a.S3.Endpoint != "" {
		out = append(out, "--"+flagS3Endpoint, a.S3.Endpoint)
	}
	if a.S3.Region != "" {
		out = append(out, "--"+flagS3Region, a.S3.Region)
	}
	if a.S3.PathStyle {
		out = append(out, "--"+flagS3PathStyle)
	}
	for _, l := range a.Logs {
		out = append(out, "--"+FlagLog, l)
	}
	return out
}

// ParseArgs reads the arguments Args renders into an Args, starting from
// DefaultArgs, and validates the result.
func ParseArgs(args []string) (Args, error) {
	a := DefaultArgs()
	fs := flag.NewFlagSet(Command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return Args{}, err
	}
	if fs.NArg() > 0 {
		return Args{}, fmt.Errorf("replicate takes no arguments, got %q; give each log with --%s", fs.Arg(0), FlagLog)
	}
	return a, a.Validate()
}

// Flags defines a's flags on fs, writing into a's fields.
func (a *Args) Flags(fs *flag.FlagSet) {
	fs.Func(FlagLog, "replicate the log in `DIR` (repeat for more logs)", func(s string) error {
		if s == "" {
			return errors.New("give a log directory")
		}
		a.Logs = append(a.Logs, s)
		return nil
	})
	fs.DurationVar(&a.SyncInterval, flagSyncInterval, a.SyncInterval, "ship the WAL every `DUR`: the most a lost machine loses of what is not yet published")
	fs.DurationVar(&a.SnapshotInterval, flagSnapshotInterval, a.SnapshotInterval, "write a full snapshot of each buffer.db every `DUR`, bounding what a restore replays")
	fs.DurationVar(&a.SnapshotRetention, flagSnapshotRetention, a.SnapshotRetention, "keep snapshots, and the WAL after them, for `DUR`")
	fs.StringVar(&a.Destination, FlagDestination, a.Destination, "ship each log's replica to `URL`/<stream>/<log>/: s3://bucket/path, file:///dir or a directory outside the root (default: <published>/<stream>/_wal/<log>/)")
	fs.StringVar(&a.S3.Endpoint, flagS3Endpoint, a.S3.Endpoint, "reach an s3:// destination at this S3 service `URL` (such as http://127.0.0.1:9000)")
	fs.StringVar(&a.S3.Region, flagS3Region, a.S3.Region, "the s3:// destination's `REGION` (default AWS_REGION)")
	fs.BoolVar(&a.S3.PathStyle, flagS3PathStyle, a.S3.PathStyle, "address the s3:// destination's bucket as <endpoint>/<bucket> (the default with --s3-endpoint)")
	fs.IntVar(&a.ReadyFD, FlagReadyFD, a.ReadyFD, "write \"ready\" to file descriptor `N` once every log replicates or stands by")
}

// Validate reports what is wrong with a, naming the flag.
func (a Args) Validate() error {
	switch {
	case len(a.Logs) == 0:
		return fmt.Errorf("give at least one log to replicate with --%s DIR", FlagLog)
	case a.SyncInterval <= 0:
		return fmt.Errorf("--%s must be positive, got %s", flagSyncInterval, a.SyncInterval)
	case a.SnapshotInterval <= 0:
		return fmt.Errorf("--%s must be positive, got %s", flagSnapshotInterval, a.SnapshotInterval)
	case a.SnapshotRetention < a.SnapshotInterval:
		return fmt.Errorf("--%s (%s) must be at least --%s (%s), or no snapshot would be kept to restore from", flagSnapshotRetention, a.SnapshotRetention, flagSnapshotInterval, a.SnapshotInterval)
	case a.ReadyFD < 0:
		return fmt.Errorf("--%s must be a file descriptor, got %d", FlagReadyFD, a.ReadyFD)
	}
	if _, err := a.Target(); err != nil {
		return err
	}
	return nil
}

// Target returns the Destination a names: the zero one without
// --destination.
func (a Args) Target() (Destination, error) {
	loc, err := warehouse.Parse(a.Destination, "")
	if err != nil {
		return Destination{}, fmt.Errorf("--%s: %w", FlagDestination, err)
	}
	if loc.S3 == "" && a.S3 != (warehouse.S3{}) {
		return Destination{}, fmt.Errorf("--%s, --%s and --%s reach an s3:// destination, but --%s is %q; give --%s s3://bucket/path, or leave them out",
			flagS3Endpoint, flagS3Region, flagS3PathStyle, FlagDestination, a.Destination, FlagDestination)
	}
	return Destination{Location: loc, S3: a.S3}, nil
}
