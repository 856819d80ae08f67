package lifecycle

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/schema"
)

// MigrateTo runs Migrate, and runs it once more when the first run only
// finished a migration an earlier run began (to the schema that run's
// intent recorded) and d declares yet another: afterwards the stream's
// current log has d's schema and sort_by. The first run's log, when
// o.KeepNext handed one over, is lent to the second as its Current and
// closed after it.
func MigrateTo(ctx context.Context, s Stream, d Declaration, o Options) (*Migration, error) {
	res, err := Migrate(ctx, s, d, o)
	if err != nil || !res.Differs {
		return res, err
	}
	first := res.Log
	o.Current = first
	res, err = Migrate(ctx, s, d, o)
	if first != nil {
		_ = first.Close()
	}
	return res, err
}

// MigrateJob is a migration written down as data, so that another
// process can run it: serve hands an online migration's file work to a
// child process at the lowest CPU priority, where the kernel schedules
// every serving stream's threads ahead of it (docs/design.md §5).
// Credentials are never part of it: the child finds them where serve
// does, in its environment.
type MigrateJob struct {
	Stream    string          `json:"stream"`
	Root      string          `json:"root"`
	Published string          `json:"published,omitempty"`
	S3        warehouse.S3    `json:"s3,omitzero"`
	Schema    json.RawMessage `json:"schema"`
	Log       logstore.Config `json:"log"`
}

// ServeMigrateJobs reads MigrateJobs from in, one JSON line each
// (jobwire.go), runs each with MigrateTo, and writes one answer line to out
// for each: the migration, or its error. It returns nil when in ends
// between jobs, and an error when a line is no job or an answer cannot be
// written.
func ServeMigrateJobs(ctx context.Context, in io.Reader, out io.Writer) error {
	lines := Jobs(in)
	for lines.Scan() {
		var job MigrateJob
		if err := json.Unmarshal(lines.Bytes(), &job); err != nil {
			return fmt.Errorf("a migration job is not valid JSON: %w", err)
		}
		var ans Answer
		m, err := job.run(ctx)
		if err != nil {
			ans.Error = err.Error()
			ans.Retired, ans.Pending = errors.Is(err, ErrRetired), errors.Is(err, ErrPending)
		} else if ans.Migration, err = json.Marshal(m); err != nil {
			return err
		}
		if err := WriteAnswer(out, ans); err != nil {
			return fmt.Errorf("answer a migration job: %w", err)
		}
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("read the migration jobs: %w", err)
	}
	return nil
}

func (j MigrateJob) run(ctx context.Context) (*Migration, error) {
	sch, err := schema.Compile(j.Schema)
	if err != nil {
		return nil, fmt.Errorf("migrate stream %q: the job's schema: %w", j.Stream, err)
	}
	lay, err := meta.NewLayout(j.Root, j.Published)
	if err != nil {
		return nil, fmt.Errorf("migrate stream %q: the job's layout: %w", j.Stream, err)
	}
	s := Stream{Layout: lay, S3: j.S3, Name: j.Stream}
	return MigrateTo(ctx, s, Declaration{Schema: sch, Log: j.Log}, Options{})
}

// ReadMigrateJobAnswer reads one answer ServeMigrateJobs wrote to r (a
// NewAnswerReader). A failed migration's error is a *JobError,
// with its wording, wrapping ErrRetired or ErrPending when the runner's
// did; any other error means r held no answer.
func ReadMigrateJobAnswer(r *bufio.Reader) (*Migration, error) {
	ans, err := ReadAnswer(r)
	if err != nil {
		return nil, fmt.Errorf("read the migration's answer: %w", err)
	}
	if ans.Error != "" {
		var is error
		if ans.Retired {
			is = ErrRetired
		} else if ans.Pending {
			is = ErrPending
		}
		return nil, &JobError{msg: ans.Error, is: is}
	}
	var m Migration
	if err := json.Unmarshal(ans.Migration, &m); err != nil {
		return nil, fmt.Errorf("read the migration's answer: %w", err)
	}
	return &m, nil
}

// JobError is a migration's error read back from its runner: its words,
// and the sentinel it wrapped.
type JobError struct {
	msg string
	is  error
}

func (e *JobError) Error() string { return e.msg }
func (e *JobError) Unwrap() error { return e.is }
