// The command line of `streamcast maintain`, the children serve runs to
// seal, compact, publish, clean and retain its logs (Maintain): the roles,
// MaintainArgs, its flags, its rendering and its parser. serve renders it
// and the command reads it back, so both take it from this one file.

package logstore

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaintainArgs is the command line of one maintenance process, `streamcast
// maintain`: the role, its cadence, the logs and the policy overrides.
// serve renders it for its children with MaintainArgs; maintain reads it back
// through Flags (or ParseMaintainArgs). The flag names live here and nowhere
// else, so renaming one changes both sides, and a field renamed or removed
// fails to compile on both.
type MaintainArgs struct {
	// Role is the step the process runs.
	Role Role
	// Every is the pause between passes (maintain's MaintainOptions.Every).
	Every time.Duration
	// FlushEvery is maintain's MaintainOptions.FlushEvery; 0 never flushes on a schedule.
	FlushEvery time.Duration
	// Logs are the directories of the logs to maintain.
	Logs []string
	// CacheLogs are the directories of logs kept as caches of another
	// server's stream (MaintainOptions.Cache): seal, compact and clean run over
	// them beside Logs; publish, clean-published and retain refuse them.
	CacheLogs []string
	// MaxOpen is MaintainOptions.MaxOpen: how many logs the process holds open
	// at once; 0 is DefaultMaxOpen.
	MaxOpen int
	// Override is MaintainOptions.Override (OverrideConfig turns it into a
	// log's Config): the settings with a flag; 0 (or "")
	// keeps the log's own.
	Override Override
	// ReadyFD is the file descriptor the process reports "ready" and
	// "flushed" on; 0 means none. The parent passes it open.
	ReadyFD int
	// AddFD is a file descriptor the parent writes logs to add on, one
	// JSON line each ({"seq":N,"logs":[…],"cache":[…]}); the process
	// answers "added N" or "refused N why" on ReadyFD. 0 means none. The
	// parent passes it open.
	AddFD int
}

// Override is the part of a log's Config a maintain
// command line may override: the retention and grace durations,
// StagingMaxBytes and the S3 endpoint, region and path style. A zero field
// keeps the log's own setting.
type Override struct {
	StagingRetention           time.Duration
	StagingMaxBytes            int64
	PublishedSnapshotRetention time.Duration
	DeleteGrace                time.Duration
	LocalDeleteGrace           time.Duration
	RetentionGrace             time.Duration
	S3Endpoint                 string
	S3Region                   string
	S3PathStyle                bool
}

// DefaultMaxOpen is how many logs a maintenance process holds open at
// once (MaintainArgs.MaxOpen 0): a few files and SQLite connections each.
const DefaultMaxOpen = 64

// The flag names of MaintainArgs; only this file spells them.
const (
	flagRole                       = "role"
	flagEvery                      = "every"
	flagFlushEvery                 = "flush-every"
	flagLog                        = "log"
	flagCacheLog                   = "cache-log"
	flagStagingRetention           = "staging-retention"
	flagStagingMaxBytes            = "staging-max-bytes"
	flagPublishedSnapshotRetention = "published-snapshot-retention"
	flagDeleteGrace                = "delete-grace"
	flagLocalDeleteGrace           = "local-delete-grace"
	flagRetentionGrace             = "retention-grace"
	flagS3Endpoint                 = "s3-endpoint"
	flagS3Region                   = "s3-region"
	flagS3PathStyle                = "s3-path-style"
	flagReadyFD                    = "ready-fd"
	flagMaxOpenLogs                = "max-open-logs"
	flagAddFD                      = "add-fd"
)

// A child's whole command line is the subcommand, the flags every
// streamcast command takes, then MaintainArgs. cmd names its root flags and the
// subcommand from these, so that renaming one fails to compile instead of
// failing serve's children at run time.
const (
	MaintainCommand = "maintain"
	FlagConfig      = "config"
	FlagLogLevel    = "log-level"
	FlagLogFormat   = "log-format"
)

// MaintainCommandLine renders a child's whole command line (without the executable):
// the subcommand, the root flags (configFile only when set), then a's flags.
// No secret ever goes on it: credentials reach children through their
// environment.
func MaintainCommandLine(configFile, logLevel, logFormat string, a MaintainArgs) []string {
	return append(MaintainChildLine(MaintainCommand, configFile, logLevel, logFormat), a.Args()...)
}

// MaintainChildLine is the start of any child's command line serve runs: the
// subcommand, then the root flags (configFile only when set). The
// subcommand's own flags follow.
func MaintainChildLine(command, configFile, logLevel, logFormat string) []string {
	line := []string{command, "--" + FlagLogFormat, logFormat, "--" + FlagLogLevel, logLevel}
	if configFile != "" {
		line = append(line, "--"+FlagConfig, configFile)
	}
	return line
}

// Defaults of a maintain command line that does not set them.
const (
	DefaultEvery      = time.Second
	DefaultFlushEvery = time.Minute
)

// DefaultMaintainArgs returns the command line's defaults: a pass each second
// and a flush each minute; no role and no log yet.
func DefaultMaintainArgs() MaintainArgs {
	return MaintainArgs{Every: DefaultEvery, FlushEvery: DefaultFlushEvery}
}

// Args renders a as the arguments of `streamcast maintain` (without the
// command's name), in a form ParseMaintainArgs reads back to a. Every and
// FlushEvery are always written, so a process listing shows the cadence;
// overrides only when set.
func (a MaintainArgs) Args() []string {
	out := []string{
		"--" + flagRole, string(a.Role),
		"--" + flagEvery, a.Every.String(),
		"--" + flagFlushEvery, a.FlushEvery.String(),
	}
	dur := func(name string, d time.Duration) {
		if d != 0 {
			out = append(out, "--"+name, d.String())
		}
	}
	str := func(name, v string) {
		if v != "" {
			out = append(out, "--"+name, v)
		}
	}
	o := a.Override
	dur(flagStagingRetention, o.StagingRetention)
	if o.StagingMaxBytes != 0 {
		out = append(out, "--"+flagStagingMaxBytes, strconv.FormatInt(o.StagingMaxBytes, 10))
	}
	dur(flagPublishedSnapshotRetention, o.PublishedSnapshotRetention)
	dur(flagDeleteGrace, o.DeleteGrace)
	dur(flagLocalDeleteGrace, o.LocalDeleteGrace)
	dur(flagRetentionGrace, o.RetentionGrace)
	str(flagS3Endpoint, o.S3Endpoint)
	str(flagS3Region, o.S3Region)
	if o.S3PathStyle {
		out = append(out, "--"+flagS3PathStyle)
	}
	if a.MaxOpen != 0 {
		out = append(out, "--"+flagMaxOpenLogs, strconv.Itoa(a.MaxOpen))
	}
	if a.ReadyFD != 0 {
		out = append(out, "--"+flagReadyFD, strconv.Itoa(a.ReadyFD))
	}
	if a.AddFD != 0 {
		out = append(out, "--"+flagAddFD, strconv.Itoa(a.AddFD))
	}
	for _, l := range a.Logs {
		out = append(out, "--"+flagLog, l)
	}
	for _, l := range a.CacheLogs {
		out = append(out, "--"+flagCacheLog, l)
	}
	return out
}

// ParseMaintainArgs reads the arguments MaintainArgs renders (flags only, with one or
// two dashes, "--flag value" or "--flag=value") into a MaintainArgs, starting
// from DefaultMaintainArgs, and validates the result.
func ParseMaintainArgs(args []string) (MaintainArgs, error) {
	a := DefaultMaintainArgs()
	fs := flag.NewFlagSet("maintain", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error says it all; the caller prints it
	a.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return MaintainArgs{}, err
	}
	if fs.NArg() > 0 {
		return MaintainArgs{}, fmt.Errorf("maintain takes no arguments, got %q; give each log with --%s", fs.Arg(0), flagLog)
	}
	if err := a.Validate(); err != nil {
		return MaintainArgs{}, err
	}
	return a, nil
}

// Flags defines a's flags on fs, each writing into a's fields, with the
// usage text a user reads. cmd adds them to its own flag set, so the names
// a user types are the names serve renders.
func (a *MaintainArgs) Flags(fs *flag.FlagSet) {
	roles := strings.Join(RoleNames(), ", ")
	fs.Var((*roleValue)(&a.Role), flagRole, "the maintenance `ROLE` to run: "+roles)
	fs.DurationVar(&a.Every, flagEvery, a.Every, "pause `DUR` between passes")
	fs.DurationVar(&a.FlushEvery, flagFlushEvery, a.FlushEvery, "seal and publish: flush everything once per `DUR`, at wall-clock multiples (0 never)")
	fs.IntVar(&a.MaxOpen, flagMaxOpenLogs, a.MaxOpen, "hold at most `N` logs open at once, closing the one used longest ago (0: "+strconv.Itoa(DefaultMaxOpen)+")")
	fs.Var((*dirsValue)(&a.Logs), flagLog, "maintain the log in `DIR` (repeat for more logs)")
	fs.Var((*dirsValue)(&a.CacheLogs), flagCacheLog, "seal, compact or clean the log in `DIR` as a cache (a relay's): clean drops its oldest files by retention alone, and nothing publishes it (repeat for more logs)")
	o := &a.Override
	fs.Var((*overrideDuration)(&o.StagingRetention), flagStagingRetention, "clean: keep published local files this `DUR` (default: the log's staging_retention)")
	fs.Var((*overrideBytes)(&o.StagingMaxBytes), flagStagingMaxBytes, "clean: past this many `BYTES` of local files, delete the oldest published ones (default: the log's staging_max_bytes)")
	fs.Var((*overrideDuration)(&o.PublishedSnapshotRetention), flagPublishedSnapshotRetention, "clean-published: expire snapshots older than `DUR` (default: the log's published_snapshot_retention)")
	fs.Var((*overrideDuration)(&o.DeleteGrace), flagDeleteGrace, "clean-published: wait `DUR` before deleting an unreferenced object (default: the log's delete_grace)")
	fs.Var((*overrideDuration)(&o.LocalDeleteGrace), flagLocalDeleteGrace, "clean: wait `DUR` before deleting a local file taken out of the log (default: the log's local_delete_grace)")
	fs.Var((*overrideDuration)(&o.RetentionGrace), flagRetentionGrace, "retain: wait `DUR` after publishing a stream's new floor before deleting below it (default: the log's retention_grace)")
	fs.StringVar(&o.S3Endpoint, flagS3Endpoint, o.S3Endpoint, "S3 service `URL` for an s3:// published prefix (default: the log's s3.endpoint)")
	fs.StringVar(&o.S3Region, flagS3Region, o.S3Region, "S3 `REGION` (default: the log's s3.region)")
	fs.BoolVar(&o.S3PathStyle, flagS3PathStyle, o.S3PathStyle, "address S3 buckets by path, not by host name")
	fs.IntVar(&a.ReadyFD, flagReadyFD, a.ReadyFD, "write \"ready\" (and \"flushed\" after each SIGUSR1 pass) to file descriptor `N`")
	fs.IntVar(&a.AddFD, flagAddFD, a.AddFD, "read logs to add, one JSON line each, from file descriptor `N`; answers go to --ready-fd")
}

// Names of the flags a command treats specially: the role completes from
// a fixed list, a log as a directory, and the ready descriptor is checked
// against the process's open files.
const (
	FlagRole     = flagRole
	FlagLog      = flagLog
	FlagCacheLog = flagCacheLog
	FlagReadyFD  = flagReadyFD
	FlagAddFD    = flagAddFD
)

// Validate reports what is wrong with a as a command line, naming the flag
// and what it takes.
func (a MaintainArgs) Validate() error {
	o := a.Override
	switch {
	case a.Role == "":
		return fmt.Errorf("--%s is required: one of %s", flagRole, strings.Join(RoleNames(), ", "))
	case !slices.Contains(Roles(), a.Role):
		return fmt.Errorf("--%s %q: no such role; the roles are %s", flagRole, a.Role, strings.Join(RoleNames(), ", "))
	case len(a.Logs)+len(a.CacheLogs) == 0:
		return fmt.Errorf("--%s is required: give the directory of each log to maintain", flagLog)
	case len(a.CacheLogs) > 0 && !CacheRole(a.Role):
		return fmt.Errorf("--%s with --%s %s: a cache log is never published, so only the seal, compact and clean roles run over it", flagCacheLog, flagRole, a.Role)
	case a.Every <= 0:
		return fmt.Errorf("--%s is %s; it must be a positive duration, such as 1s", flagEvery, a.Every)
	case a.FlushEvery < 0:
		return fmt.Errorf("--%s is %s; it must be a positive duration, or 0 for never", flagFlushEvery, a.FlushEvery)
	case o.StagingRetention < 0 || o.PublishedSnapshotRetention < 0 || o.DeleteGrace < 0 || o.LocalDeleteGrace < 0 || o.RetentionGrace < 0 || o.StagingMaxBytes < 0:
		return errors.New("retention, grace and size flags must be positive (or 0 to keep the log's own setting)")
	case a.MaxOpen < 0:
		return fmt.Errorf("--%s is %d; it must be a positive number of logs, or 0 for %d", flagMaxOpenLogs, a.MaxOpen, DefaultMaxOpen)
	case a.ReadyFD < 0 || a.ReadyFD == 1 || a.ReadyFD == 2:
		return fmt.Errorf("--%s %d: give a descriptor the parent passed beyond stdin, stdout and stderr (3 or more)", flagReadyFD, a.ReadyFD)
	case a.AddFD < 0 || (a.AddFD > 0 && a.AddFD < 3) || (a.AddFD != 0 && a.AddFD == a.ReadyFD):
		return fmt.Errorf("--%s %d: give a descriptor the parent passed beyond stdin, stdout and stderr (3 or more), other than --%s", flagAddFD, a.AddFD, flagReadyFD)
	case a.AddFD != 0 && a.ReadyFD == 0:
		return fmt.Errorf("--%s needs --%s: the answer to each request to add logs goes there", flagAddFD, flagReadyFD)
	}
	for _, l := range slices.Concat(a.Logs, a.CacheLogs) {
		if l == "" {
			return fmt.Errorf("--%s is empty: give the directory of a log", flagLog)
		}
	}
	return nil
}

// The flag values below also have the Type method of spf13/pflag's Value,
// so a cobra command takes them as they are.

// roleValue is --role: one of Roles.
type roleValue Role

func (v *roleValue) String() string { return string(*v) }
func (v *roleValue) Type() string   { return "role" }
func (v *roleValue) Set(s string) error {
	if !slices.Contains(Roles(), Role(s)) {
		return fmt.Errorf("%q is not a role; the roles are %s", s, strings.Join(RoleNames(), ", "))
	}
	*v = roleValue(s)
	return nil
}

// dirsValue is --log, repeated: each use adds a directory.
type dirsValue []string

func (v *dirsValue) String() string { return strings.Join(*v, ",") }
func (v *dirsValue) Type() string   { return "stringArray" }
func (v *dirsValue) Set(s string) error {
	*v = append(*v, s)
	return nil
}

// overrideDuration is a duration whose zero means "the log's own": it
// prints as nothing then, so no usage text claims a default of 0s.
type overrideDuration time.Duration

func (v *overrideDuration) String() string {
	if *v == 0 {
		return ""
	}
	return time.Duration(*v).String()
}
func (v *overrideDuration) Type() string { return "duration" }
func (v *overrideDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (such as 90s, 10m or 1h)")
	}
	*v = overrideDuration(d)
	return nil
}

// overrideBytes is a byte count whose zero means "the log's own".
type overrideBytes int64

func (v *overrideBytes) String() string {
	if *v == 0 {
		return ""
	}
	return strconv.FormatInt(int64(*v), 10)
}
func (v *overrideBytes) Type() string { return "int64" }
func (v *overrideBytes) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("not a whole number of bytes")
	}
	*v = overrideBytes(n)
	return nil
}

// Role names a maintenance step that `streamcast maintain` runs in a loop
// over one or more logs, beside the serving writer. A role is also a lock:
// <log>/<role>.lock between processes and a mutex of the handle's within
// one (Log.Acquire), so each role runs one pass at a time per log.
type Role string

// The roles maintain runs.
const (
	// RoleSeal seals full targets every pass, and everything buffered once
	// per FlushEvery.
	RoleSeal Role = "seal"
	// RoleCompact merges small local files into larger ones.
	RoleCompact Role = "compact"
	// RolePublish pushes finished files into the published table every
	// pass, and every file once per FlushEvery.
	RolePublish Role = "publish"
	// RoleClean evicts buffered rows that files hold, takes published
	// local files out past retention and drains the local delete queue.
	RoleClean Role = "clean"
	// RoleCleanPublished expires old snapshots of the published table and
	// deletes what nothing references any more, after the grace.
	RoleCleanPublished Role = "clean-published"
	// RoleRetain runs a stream's retention pass (publish the floor, then
	// delete below it after the grace). The pass is the stream's, not the
	// log's: it reads the stream's metadata, which this package must
	// not import (pkg/meta sits above it), so its caller supplies it
	// (MaintainOptions.Retain).
	RoleRetain Role = "retain"
)

// Roles returns the roles maintain runs, in the order serve starts them.
func Roles() []Role {
	return []Role{RoleSeal, RoleCompact, RolePublish, RoleClean, RoleCleanPublished, RoleRetain}
}

// RoleNames returns Roles as strings, for usage texts and completions.
func RoleNames() []string {
	roles := Roles()
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return names
}

// CacheRole reports whether role runs over a log kept as a cache of
// another server's stream (a relay's): the roles that keep a cache (seal,
// compact, clean), not those that publish it or serve the published
// table's retention.
func CacheRole(role Role) bool {
	return role == RoleSeal || role == RoleCompact || role == RoleClean
}
