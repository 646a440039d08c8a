//go:build !race

package testutil

// RaceEnabled tells whether the race detector is on.
const RaceEnabled = false
