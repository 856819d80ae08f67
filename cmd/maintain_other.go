//go:build !unix

package cmd

import (
	"errors"
	"os"
)

// openAddFD: a read of an inherited descriptor could not be ended here,
// and serve passes none to its children on this system.
func openAddFD(int) (*os.File, error) {
	return nil, errors.New("this system cannot read logs to add from an inherited descriptor (serve passes none here); leave --add-fd out")
}
