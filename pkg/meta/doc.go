// Package meta owns the layout of a streamcast root: where a stream's home
// directory, its logs, its metadata and its published tables sit, what
// each log is named, and which stream names are allowed. Every path of a
// stream or log is worked out here and nowhere else, the default published
// prefix (<root>/published) included; see docs/design.md, "Storage layout".
//
// In this issue meta holds only the layout; stream identity and versioned
// metadata come later. It may import logstore and schema, and must never
// import broker, wire or cmd. It never opens a log or touches the disk: its
// functions compute names and paths, and check names and prefixes.
package meta
