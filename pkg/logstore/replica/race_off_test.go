//go:build !race

package replica_test

// raceEnabled skips the tests whose property is a wall-clock bound: under
// the race detector everything runs several times slower.
const raceEnabled = false
