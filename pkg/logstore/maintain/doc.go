// Package maintain owns the command line of one maintenance process,
// `streamcast maintain`: Args, the role, its cadence, the logs and the
// policy overrides, rendered by serve for its children (Args.Args) and
// read back by the maintain command (Flags, ParseArgs). The flag names
// live here and nowhere else, so the two sides cannot drift apart. It
// sits above logstore (it names logstore's roles and Config; logstore
// never imports it) and never opens a log or runs a role: that is
// logstore.RunRole.
package maintain
