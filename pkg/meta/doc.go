// Package meta owns one stream as a whole: the layout of a streamcast root
// (where a stream's home, its logs, its metadata and its published tables
// sit, what each log is named, which stream names are allowed), and the
// stream's versioned metadata: its identity (stream_id), its ordered logs,
// every column type it ever declared, its retirement, retention and any
// pending multi-step operation (Metadata), stored as immutable versions in
// two places, the home and the published prefix, published copy first,
// with compare-and-swap writes (Store); see docs/design.md, "Storage
// layout" and "Stream metadata".
//
// It carries I8: a stream's identity and history are never minted afresh
// over data that exists at home or at its published prefix. Every path
// that creates a stream or a log asks Resolve first, which adopts,
// upgrades or refuses, and never mints over what it finds.
//
// It also owns the stream's retention (Retain): the window `retain` sets
// (SetMaxAge; ParseMaxAge is the one parser of its spelling, "30d",
// "1w3d" or "none"), the floor each pass publishes, published copy first
// and then on every log, and the deletions that wait out their grace in
// the metadata. The pass runs as the retain maintenance role: the role
// runner (logstore.Maintain) sits below this package and calls the pass
// through a hook that cmd fills (logstore.MaintainOptions.Retain), so the
// runner never imports meta.
//
// It also checks a protected stream's history against its history_guard
// (Guard): serve asks it, before admitting traffic, whether the metadata and
// the current log are still the history the stream's consumers read from
// offset 1, and refuses the stream (GuardError) when they are not.
//
// It may import logstore (to describe and check a log) and schema, and
// must never import broker, wire or cmd. It never appends rows and never
// opens a log as its Writer: retention works on logs as a Maintainer, and
// the offline steps that write (migrate, retire, restore) live in
// pkg/meta/lifecycle. Its sub-packages are the parts of a stream that
// read alone: config (the product's configuration, which every command
// uses), history and sqlview (reading the history as one table),
// lifecycle (the steps that end a log).
package meta
