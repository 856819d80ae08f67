package lifecycle

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

func TestAnswersRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	for _, a := range []Answer{
		{Migration: []byte(`{"To":"t-v2","Seam":24}`)},
		{Error: "migrate stream \"t\": it is retired", Retired: true},
		{Error: "busy", Pending: true},
	} {
		if err := WriteAnswer(&buf, a); err != nil {
			t.Fatal(err)
		}
	}
	r := NewAnswerReader(&buf)
	for i, want := range []string{`{"To":"t-v2","Seam":24}`, "retired", "pending"} {
		a, err := ReadAnswer(r)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		got := string(a.Migration)
		if a.Retired {
			got = "retired"
		} else if a.Pending {
			got = "pending"
		}
		if got != want {
			t.Errorf("answer %d = %+v; want %s", i, a, want)
		}
	}
	if _, err := ReadAnswer(r); err == nil {
		t.Error("a fourth answer was read after three")
	}
}

func TestReadAnswerRefuses(t *testing.T) {
	for _, line := range []string{
		"", "\n", "{}\n", `{"migration":null}` + "\n", `{"migration":{},"error":"x"}` + "\n",
		"{not json\n", `{"error":1}` + "\n", `{"error":"x"}`, // no newline: the child died mid-line
		`{"migration":{` + strings.Repeat(" ", MaxLine) + `}}` + "\n",
	} {
		if a, err := ReadAnswer(NewAnswerReader(strings.NewReader(line))); err == nil {
			t.Errorf("ReadAnswer(%.60q) = %+v; want an error", line, a)
		}
	}
}

// FuzzReadAnswer: whatever a worker process writes, reading it never
// panics, and an answer it takes holds exactly one of a migration and an
// error.
func FuzzReadAnswer(f *testing.F) {
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
		a, err := ReadAnswer(bufio.NewReaderSize(strings.NewReader(s), 16))
		if err != nil {
			return
		}
		if (a.Error == "") == (len(a.Migration) == 0) {
			t.Fatalf("ReadAnswer(%q) = %+v: want exactly one of a migration and an error", s, a)
		}
	})
}
