//go:build race

package fleet_test

// raceEnabled: the race detector slows the day simulation about tenfold.
const raceEnabled = true
