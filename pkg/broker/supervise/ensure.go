package supervise

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
)

// Logs are the absolute log directories a Group runs over, in serve's
// order, by what the roles do with each.
type Logs struct {
	Live       []string // logs that take rows: every role runs over them
	Retired    []string // retired streams' logs: only retain (Group.RetiredLogs)
	Replicated []string // live logs the replicate child ships (Group.ReplicateLogs)
	Cache      []string // relays' cache logs (Group.CacheLogs)
}

// Spec is how Ensure builds a Group: everything but its logs.
type Spec struct {
	Executable   string // the streamcast binary the children run
	ConfigFile   string // passed to the children as --config when set
	Roles        []Schedule
	FlushEvery   time.Duration
	ReadyTimeout time.Duration
	Replicate    replica.Args      // the replicate child's cadence
	Overrides    logstore.Override // Group.Overrides
	MaxOpenLogs  int
	Logger       *log.Logger
}

// Ensure makes the running Group one over logs. A Group already running
// over exactly these logs is left alone. When logs only appends live or
// retired logs to the Group's (serve appends the logs of a stream it
// starts), the children running are handed them (Group.Add) and none is
// restarted; a child down at that moment gets them on its command line
// when it restarts. Otherwise, or when Add fails, the old Group is halted
// (each child finishes its pass) and a new one started over every log,
// each child ready before Ensure returns, none when no role has a log to
// run over. It fails with NoExecutable when a child must run and sp names
// no binary. The caller serialises its calls.
func (r *Runner) Ensure(ctx context.Context, logs Logs, sp Spec) error {
	if r.runs(logs) {
		return nil
	}
	// A restart over every log costs seconds at tens of logs (each child
	// starts, checks every log, passes over every log); a start only
	// appends logs, which the running children can take as they run.
	if g := r.cur.Load(); g != nil {
		if live, retired, ok := g.additions(logs); ok {
			err := g.Add(ctx, live, retired)
			if err == nil {
				return nil
			}
			if sp.Logger != nil {
				sp.Logger.Warn("the maintenance children did not take the new logs; restarting them over every log instead", "err", err)
			}
		}
	}
	if old := r.Replace(nil); old != nil {
		old.Halt()
	}
	if len(logs.Live)+len(logs.Retired)+len(logs.Cache) == 0 || len(sp.Roles)+len(logs.Replicated) == 0 {
		return nil
	}
	if sp.Executable == "" {
		return NoExecutable(len(sp.Roles) + min(len(logs.Replicated), 1))
	}
	g := New(sp.Executable, sp.ConfigFile, sp.Roles, logs.Live, sp.FlushEvery, sp.ReadyTimeout, sp.Logger)
	g.RetiredLogs = logs.Retired
	g.CacheLogs = logs.Cache
	g.ReplicateLogs = logs.Replicated
	g.Replicate = sp.Replicate
	g.Overrides = sp.Overrides
	g.MaxOpenLogs = sp.MaxOpenLogs
	r.Replace(g)
	if err := g.Start(ctx); err != nil {
		r.Replace(nil)
		return err
	}
	return nil
}

// runs reports whether a Group runs now over exactly logs.
func (r *Runner) runs(logs Logs) bool {
	g := r.cur.Load()
	return g != nil && slices.Equal(g.Logs(), logs.Live) && slices.Equal(g.retired(), logs.Retired) &&
		slices.Equal(g.ReplicateLogs, logs.Replicated) && slices.Equal(g.CacheLogs, logs.Cache)
}

// additions returns what logs adds to the logs g runs over, when that is
// all it changes: the live and retired logs each extended at their end
// (serve appends a stream it starts), the cache and replicated ones the
// same.
func (g *Group) additions(logs Logs) (live, retired []string, ok bool) {
	cur, ret := g.Logs(), g.retired()
	if len(logs.Live) < len(cur) || len(logs.Retired) < len(ret) ||
		!slices.Equal(logs.Live[:len(cur)], cur) || !slices.Equal(logs.Retired[:len(ret)], ret) ||
		!slices.Equal(logs.Replicated, g.ReplicateLogs) || !slices.Equal(logs.Cache, g.CacheLogs) {
		return nil, nil, false
	}
	return logs.Live[len(cur):], logs.Retired[len(ret):], true
}

// NoExecutable is the error when roles maintenance children must run and
// nothing says which binary they run.
func NoExecutable(roles int) error {
	return fmt.Errorf("maintain runs %d roles as child processes, but no streamcast executable was given to run them (Options.Executable); "+
		"give one, or set maintain: false to run none", roles)
}
