package main

import (
	"os"

	"github.com/streamcast/streamcast/cmd"
)

func main() {
	os.Exit(cmd.Execute())
}
