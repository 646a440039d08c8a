// Package bench holds the end-to-end benchmarks: the built backfill binary
// run on generated inputs, each beside a baseline measured in the same run.
//
// Run them with
//
//	make bench-e2e
//	go test -run '^$' -bench . -benchtime 1x ./bench/
//
// Inputs are generated once and cached in -bench.dir (default
// $TMPDIR/backfill-bench).
package bench
