//go:build race

package fleet_test

// raceEnabled: the race detector slows the differential test about tenfold.
const raceEnabled = true
