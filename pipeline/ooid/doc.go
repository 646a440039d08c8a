// Package ooid computes, formats and decodes OOIDs: the 64-bit measurement
// identifiers of the OONI corpus.
//
// Two layouts share the 64 bits. Both start with the 32-bit Unix time of the
// report (backfilled) or of the receipt (collector-stamped) in the high word,
// so IDs sort by time first.
//
// Backfilled (historical measurements, 32:4:28):
//
//	 63                              32 31  28 27                       0
//	+--------------------------------+------+---------------------------+
//	|           ts (uint32)          | 1111 |   counter (28 bits)       |
//	+--------------------------------+------+---------------------------+
//
//	counter = (window(sha1(textname), off) + ndx) mod 2^bits
//
// where window reads the 7 hex digits of the SHA-1 hexdigest starting at hex
// offset off (0..33; default 33, the last 7 digits) and bits is the counter
// width (20..28; default 28). With fewer than 28 bits the window is masked to
// the counter width and the bits between the counter and the 0xF nibble are
// zero. Changing bits or off is a new [Scheme]; every output records it.
//
// Collector-stamped (measurements arriving now, 32:8:24):
//
//	 63                              32 31        24 23                 0
//	+--------------------------------+------------+---------------------+
//	|           ts (uint32)          | collector  |  counter (24 bits)  |
//	+--------------------------------+------------+---------------------+
//
// The collector id is 0x00..0xEF: 0xF0..0xFF would alias the 0xF nibble of
// backfilled IDs. [ID.Decode] tells the two apart by that nibble.
//
// # Text and database forms
//
// The canonical text form is 16 lowercase hex digits ([ID.String]). In
// PostgreSQL an OOID is a bigint holding the same 64 bits in two's
// complement ([ID.Int64]); a ts of 2^31 or more (2038-01-19T03:14:08Z and
// later) therefore stores as a negative bigint and round-trips through
// [FromInt64]. In JSON an OOID is always the hex string, never a number.
//
// # Textnames
//
// The ts of a backfilled OOID comes from the report's textname
// "YYYY-MM-DD/<basename>" ([ParseTextname]). The grammar is the one of
// ooni-uuid in the OONI pipeline: the report_id timestamp wins when
// the report_id has one, else the filename timestamp; the bucket date never
// counts. Textnames outside that grammar but inside the looser one the
// canning step enforced get the filename timestamp and [SourceFallback].
// Anything else is an error; so are impossible calendar values.
package ooid
