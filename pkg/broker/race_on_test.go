//go:build race

package broker

// raceEnabled scales load tests down under the race detector.
const raceEnabled = true
