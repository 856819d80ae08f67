package cmd

import "github.com/streamcast/streamcast/pkg/meta/config"

// refuseProtected refuses command on a stream the config declares with a
// history_guard: migrate, retire and retain would each change the history
// the guard's consumers rebuild from (see docs/lifecycle.md, "History guard").
// A stream the config does not declare has no guard.
func refuseProtected(cfg config.Config, stream, command string) error {
	for _, s := range cfg.Streams {
		if s.Name == stream {
			return s.ProtectedError(command)
		}
	}
	return nil
}
