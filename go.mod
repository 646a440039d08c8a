module github.com/backfill-dev/backfill

go 1.26.0

require golang.org/x/tools v0.52.0

require (
	github.com/klauspost/compress v1.20.3
	golang.org/x/sync v0.24.0
)
