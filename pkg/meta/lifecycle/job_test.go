//go:build linux

package lifecycle_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
)

// TestMigrateJobsRunAsTheCallWould sends the migration worker's stream of
// jobs through ServeMigrateJobs: the first moves the stream to v2 exactly
// as Migrate does (checkMigrated), the second, to the schema it now has,
// is a no-op, and a third on a retired stream comes back as a JobError
// that still wraps ErrRetired. The input's end ends it without error.
func TestMigrateJobsRunAsTheCallWould(t *testing.T) {
	f := newFixture(t, "default", 23)
	job := func(schemaJSON string) lifecycle.MigrateJob {
		return lifecycle.MigrateJob{Stream: stream, Root: f.root, Published: f.pub, S3: f.stream().S3, Schema: json.RawMessage(schemaJSON), Log: f.logConfig("", nil)}
	}
	var in bytes.Buffer
	enc := json.NewEncoder(&in) // one line per job
	for _, j := range []lifecycle.MigrateJob{job(schemaV2), job(schemaV2)} {
		if err := enc.Encode(j); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := lifecycle.ServeMigrateJobs(context.Background(), &in, &out); err != nil {
		t.Fatal(err)
	}
	answers := bufio.NewReader(&out)
	m, err := lifecycle.ReadMigrateJobAnswer(answers)
	if err != nil {
		t.Fatal(err)
	}
	if m.From != stream || m.To != "trades-v2" || m.Seam != 24 || m.Marks != 1 || m.Unchanged || m.Version != 3 {
		t.Errorf("the first job = %+v; want trades → trades-v2 at 24, one mark, version 3", m)
	}
	checkMigrated(t, f)
	if m, err := lifecycle.ReadMigrateJobAnswer(answers); err != nil || !m.Unchanged || m.To != "trades-v2" {
		t.Errorf("the second job, to the schema the stream has: %+v, %v; want unchanged", m, err)
	}
	if _, err := lifecycle.ReadMigrateJobAnswer(answers); err == nil {
		t.Error("a third answer was read after two jobs")
	}

	if _, err := lifecycle.Retire(context.Background(), f.stream(), lifecycle.Options{}); err != nil {
		t.Fatal(err)
	}
	in.Reset()
	out.Reset()
	if err := enc.Encode(job(schemaV1)); err != nil {
		t.Fatal(err)
	}
	if err := lifecycle.ServeMigrateJobs(context.Background(), &in, &out); err != nil {
		t.Fatal(err)
	}
	_, err = lifecycle.ReadMigrateJobAnswer(bufio.NewReader(&out))
	var je *lifecycle.JobError
	if !errors.As(err, &je) || !errors.Is(err, lifecycle.ErrRetired) || !strings.Contains(err.Error(), "retired") {
		t.Fatalf("a job on a retired stream: %v; want its refusal, wrapping ErrRetired", err)
	}

	if err := lifecycle.ServeMigrateJobs(context.Background(), strings.NewReader("{not json\n"), &out); err == nil {
		t.Error("a line that is no job was taken")
	}
}
