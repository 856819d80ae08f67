package cmd

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/schema"
)

// lifecycleTarget is a stream an offline lifecycle command (migrate,
// retire) works on: where it lives, its declaration in the config, and its
// compiled schema.
type lifecycleTarget struct {
	stream lifecycle.Stream
	decl   config.Stream
	schema *schema.Schema
}

// lifecycleTarget finds name among the config's streams, after the checks
// serve runs, and refuses a stream that has no log (live-only) or is
// protected (command names the refusing command; "" for a command that
// only appends, which a history_guard allows).
func (a *app) lifecycleTarget(name, command string) (lifecycleTarget, error) {
	cfg := a.cfg
	schemas, err := cfg.Compile()
	if err != nil {
		return lifecycleTarget{}, err
	}
	i := -1
	for j, st := range cfg.Streams {
		if st.Name == name {
			i = j
		}
	}
	if i < 0 {
		var names []string
		for _, st := range cfg.Streams {
			names = append(names, st.Name)
		}
		return lifecycleTarget{}, fmt.Errorf("stream %q is not declared in the config (%s declares %q); declare it there as serve reads it", name, a.configName(), names)
	}
	st := cfg.Streams[i]
	if !st.Durable {
		return lifecycleTarget{}, fmt.Errorf("stream %q is live-only (durable: false): it has no log", name)
	}
	if command != "" {
		if err := st.ProtectedError(command); err != nil {
			return lifecycleTarget{}, err
		}
	}
	lay, err := meta.NewLayout(cfg.Root, cfg.Published)
	if err != nil {
		return lifecycleTarget{}, config.PublishedError(err)
	}
	return lifecycleTarget{
		stream: lifecycle.Stream{Layout: lay, S3: cfg.S3, Name: name},
		decl:   st,
		schema: schemas[i],
	}, nil
}

// configName names the config file read, for messages.
func (a *app) configName() string {
	if a.configUsed == "" {
		return "the embedded default"
	}
	return a.configUsed
}

// printJSON writes v as one JSON line to stdout.
func (a *app) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", b)
	return err
}

// micros spells µs since the epoch as RFC 3339, UTC.
func micros(us int64) string { return time.UnixMicro(us).UTC().Format(time.RFC3339Nano) }
