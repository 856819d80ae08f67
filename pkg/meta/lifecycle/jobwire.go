// The line protocol between serve and its migration worker process
// (docs/design.md §5): one JSON line per job on the worker's stdin, one
// JSON line per answer on its stdout. This file reads and writes the lines
// only; job.go says what a job and its answer hold.

package lifecycle

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLine bounds a line either way: a job's schema is at most the
// control API's 256 KiB body, and the rest is small.
const MaxLine = 4 << 20

// Answer is the worker's answer to one job: what the migration did, or
// why it failed, never both.
type Answer struct {
	Migration json.RawMessage `json:"migration,omitempty"`
	Error     string          `json:"error,omitempty"`
	// Retired and Pending mark the two refusals a caller tells apart
	// (lifecycle.ErrRetired, lifecycle.ErrPending).
	Retired bool `json:"retired,omitempty"`
	Pending bool `json:"pending,omitempty"`
}

// Jobs returns a scanner over in's job lines.
func Jobs(in io.Reader) *bufio.Scanner {
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 0, 64<<10), MaxLine)
	return lines
}

// WriteJob writes job as one line.
func WriteJob(w io.Writer, job any) error {
	return writeLine(w, job)
}

// WriteAnswer writes a as one line.
func WriteAnswer(w io.Writer, a Answer) error {
	return writeLine(w, a)
}

func writeLine(w io.Writer, v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(line) >= MaxLine {
		return fmt.Errorf("a line of %d bytes is over the %d the other end reads", len(line), MaxLine)
	}
	_, err = w.Write(append(line, '\n'))
	return err
}

// NewAnswerReader returns the reader ReadAnswer reads r's answers with.
func NewAnswerReader(r io.Reader) *bufio.Reader {
	return bufio.NewReaderSize(r, 64<<10)
}

// ReadAnswer reads one answer line from r. An error means r held no
// answer: it ended, or the line is no answer (not JSON, too long, or
// holding neither a migration nor an error, or both).
func ReadAnswer(r *bufio.Reader) (Answer, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > MaxLine {
			return Answer{}, fmt.Errorf("an answer line is over %d bytes", MaxLine)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return Answer{}, fmt.Errorf("read the answer: %w", err)
		}
	}
	var a Answer
	if err := json.Unmarshal(line, &a); err != nil {
		return Answer{}, fmt.Errorf("the answer is not JSON: %w", err)
	}
	if bytes.Equal(a.Migration, []byte("null")) {
		a.Migration = nil // as if left out
	}
	migrated := len(a.Migration) > 0
	switch {
	case a.Error == "" && !migrated:
		return Answer{}, errors.New("the answer holds neither a migration nor an error")
	case a.Error != "" && migrated:
		return Answer{}, errors.New("the answer holds both a migration and an error")
	}
	return a, nil
}
