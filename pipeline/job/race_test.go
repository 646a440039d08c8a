//go:build race

package job_test

const raceEnabled = true
