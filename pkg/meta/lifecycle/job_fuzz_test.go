package lifecycle_test

import (
	"bufio"
	"errors"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
)

// FuzzReadMigrateJobAnswer: whatever a worker process writes, reading it
// never panics, and gives either a migration or an error, never both or
// neither.
func FuzzReadMigrateJobAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"migration":{"Stream":"t","From":"t","To":"t-v2","Seam":24,"Marks":1,"Version":3}}` + "\n",
		`{"error":"migrate stream \"t\": it is retired","retired":true}` + "\n",
		`{"error":"x","pending":true}` + "\n",
		`{}` + "\n",
		`{"migration":null,"error":""}` + "\n",
		`{"migration":{"Seam":"x"}}` + "\n",
		"\n",
		`{"error":1}`,
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := lifecycle.ReadMigrateJobAnswer(bufio.NewReaderSize(strings.NewReader(s), 4096))
		if (m == nil) == (err == nil) {
			t.Fatalf("ReadMigrateJobAnswer(%q) = %v, %v; want exactly one of them", s, m, err)
		}
		var je *lifecycle.JobError
		if errors.As(err, &je) && je.Error() == "" {
			t.Fatalf("ReadMigrateJobAnswer(%q): a JobError without words", s)
		}
	})
}
