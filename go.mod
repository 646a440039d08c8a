module github.com/backfill-dev/backfill

go 1.26
