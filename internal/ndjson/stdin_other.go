//go:build !unix

package ndjson

import (
	"io"
	"os"
)

// Interruptible returns f as it is where descriptors cannot be made
// non-blocking: a load reading a quiet console then ends at the next line,
// at the input's end, or when the process does.
func Interruptible(f *os.File) (r io.Reader, release func()) {
	return f, func() {}
}
