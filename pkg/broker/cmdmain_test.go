//go:build linux

package broker_test

import (
	"os"

	"github.com/streamcast/streamcast/cmd"
)

// asStreamcastEnv makes this test binary the streamcast command line: the
// supervision tests start it as `streamcast serve` and as the maintenance
// children serve forks (`streamcast maintain …`), which inherit the
// variable. It is read in init, before the testing package parses flags.
const asStreamcastEnv = "STREAMCAST_BROKER_TEST_AS_STREAMCAST"

func init() {
	if os.Getenv(asStreamcastEnv) == "1" {
		os.Exit(cmd.Execute())
	}
}
