// Package maintain runs the maintenance roles of `streamcast maintain`
// (Run: seal, compact, publish, clean, clean-published) over logs in a
// loop, and owns that command's line: Args, rendered by serve for its
// children (Args.Args) and read back by the maintain command (Flags,
// ParseArgs), so the two sides cannot drift apart. A running Run takes
// more logs through Additions, stepping them at once and leaving the
// others' schedule alone, so a stream serve starts costs its children no
// restart. It sits above logstore and drives logs only through
// logstore's exported API; every step it runs is crash-safe there
// (docs/design.md, I3 and I7), so a pass may be interrupted or repeated at
// any point. It must never hold every log open at once, nor touch a log's
// files itself.
package maintain
