// Package replay decides where a subscription starts: from the frontier
// when no offset was asked for, else at the offset asked (0: the
// earliest), replaying [start, frontier) first, or, when that cannot be
// served exactly, the refusal naming why and the numbers (I6,
// docs/design.md): not durable, empty, ahead, evicted, too old for
// max_replay.
//
// It sits below pkg/broker: broker imports it, and it must never import
// broker or its other sub-packages. It only decides from the figures it is
// given: it reads no log, takes no lock and writes no frame; the broker
// reads the extent and the frontier under its fan-out lock (I2) and counts
// the rows of a window it refuses by distance.
package replay
