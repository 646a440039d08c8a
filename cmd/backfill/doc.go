/*
Backfill stamps stable 64-bit IDs (OOIDs) onto archived OONI measurements,
proves there are no collisions, and loads the result.

Usage:

	backfill COMMAND [flags] [arguments]
	backfill help COMMAND

Commands:

	run          backfill OOIDs over OONI canned or autoclaved buckets into Parquet or PostgreSQL
	schema       create the PostgreSQL tables of run --sink postgres
	status       show what an output holds: buckets, rejects, notices, what --resume would do
	audit        count OOID collisions per counter width and SHA-1 offset
	plan         split an input's buckets into shards for runs on several machines
	check        settle the collision verdicts of a plan's shards
	verify       prove an output's IDs from the output alone, and print their digests
	census       the measurements that are the same measurement twice (run --measurement-uid)
	load         load a shard of a plan into the job's output, with the verdicts
	keysearch    find a keyed ID scheme with no collisions at a counter width
	gen          write a synthetic corpus (or manifest) with its ground truth
	ooid         compute backfilled OOIDs for textnames and measurement indexes
	stamp        issue collector-stamped OOIDs that never repeat (filter, count or HTTP)
	decode       decode OOIDs into their fields, as JSON lines
	granule-id   NASA Cumulus unique granule IDs, payloads and collision risk
	cmr-temporal the temporal values of CMR files, as Cumulus stores them
	granule-write   write Cumulus messages' granule records (Cumulus v21's write path)
	granule-recover replay a Cumulus Dead Letter Archive through granule-write
	granule-schema  create Cumulus's granule tables for databases Cumulus did not make
	version      print the version

Flags go before, between or after the arguments; "--" ends them. Every command
takes -h for its own help. Results go to standard output; errors, rejected
lines and progress go to standard error.

Examples:

	backfill gen --out corpus && backfill run --in corpus --out out
	backfill status out --in corpus
	backfill verify out
	backfill audit --counter-bits 20..28 --offsets all corpus.tsv
	backfill keysearch --counter-bits 24 --out scheme24.txt corpus.tsv
	backfill ooid 2012-12-05/20121205T071421Z-MM-AS18399-http_invalid_request_line-no_report_id-0.1.0-probe.yaml 0 1
	printf '%s\t%d\n' "$TEXTNAME" 7 | backfill ooid -
	backfill decode 50bef44df29c69e2

EXIT STATUS

	0    success
	1    failure: nothing is guaranteed
	2    usage error
	3    completed, but some inputs were rejected (each one reported);
	     run: with --strict, notices count too
	130  interrupted
*/
package main
