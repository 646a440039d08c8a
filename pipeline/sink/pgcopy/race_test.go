//go:build race

package pgcopy_test

const raceEnabled = true
