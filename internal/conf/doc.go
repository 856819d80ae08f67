// Package conf decodes a YAML configuration into a typed Go struct and
// writes it back out, so that the struct's yaml tags are the only list of
// keys there is: the keys a file may hold (anything else is refused, naming
// the key and its line), the keys an environment variable or flag may set
// (Keys), and what a rendering prints (YAML, JSON).
//
// It owns the bookkeeping that makes configuration errors useful: where each
// key's value came from (a file and line, an override such as an
// environment variable or a flag, or the default), kept in Origins, and an
// Error type that carries the key and that origin. It also owns redaction: a
// field tagged secret:"true" is never rendered.
//
// It knows nothing of streamcast's own settings (pkg/broker's Config holds
// them and their checks) and never reads a file, the environment or flags
// itself: cmd does, once, and hands the bytes and overrides in.
package conf
