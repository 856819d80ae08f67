// Package supervise runs serve's maintenance children: one `streamcast
// maintain --role R --log PATH…` process per role, each in its own process
// group, forked from one locked OS thread so that on Linux its
// parent-death signal fires only when serve dies. A Group waits for every
// child to report ready, restarts a child that exits with capped backoff,
// reports them for /stats, and stops them in the order that leaves every
// acknowledged row sealed and published (seal, then publish, then the
// rest), sealing and publishing through serve's own handles what a child
// left. Logs appended while the children run (a stream started) reach the
// running children on a pipe, none restarted (Group.Add, through Ensure);
// any other change of the set of logs, or an addition a child does not
// confirm, replaces the Group with one over every log.
//
// It sits below pkg/broker: broker and the control API import it, and it
// must never import either (what it needs of the config comes in as plain
// values and Schedule). It never appends rows (I7) and never puts a secret
// on a child's command line: credentials reach a child only through its
// environment. It is its own package because supervising child processes
// (forking, process groups, parent-death signals, backoff) reads alone and
// shares nothing with serving connections.
package supervise
