//go:build race

package engine_test

// raceEnabled: the race detector slows the engine tests about fourfold.
const raceEnabled = true
