package ooid_test

import (
	"fmt"

	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// A backfilled OOID: ts in the high word, 0xF, then the 28-bit counter.
func Example() {
	r, err := ooid.DefaultScheme.Report("2012-12-05/20121205T071421Z-MM-AS18399-http_invalid_request_line-no_report_id-0.1.0-probe.yaml")
	if err != nil {
		panic(err)
	}
	for ndx := uint32(0); ndx < 2; ndx++ {
		id := r.ID(ndx)
		fmt.Printf("%s ts=%#x nibble=%#x counter=%#07x\n", id, uint64(id)>>32, uint64(id)>>28&0xF, uint64(id)&(1<<28-1))
	}
	// Output:
	// 50bef44df29c69e2 ts=0x50bef44d nibble=0xf counter=0x29c69e2
	// 50bef44df29c69e3 ts=0x50bef44d nibble=0xf counter=0x29c69e3
}

// The report_id timestamp wins over the filename's; the bucket date is
// never used.
func ExampleParseTextname() {
	t, err := ooid.ParseTextname("2017-11-14/20031106T094115Z-IQ-AS50710-ndt-20171113T151305Z_AS50710_beuliHbl2zzV3F05or7NIt4ynhZFUCCOjKf1okz1zTov3lvLJU-0.2.0-probe.json")
	fmt.Println(t.TS, t.Source, t.Bucket, err)
	_, err = ooid.ParseTextname("2012-12-05/20120431T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml")
	fmt.Println(err)
	// Output:
	// 1510585985 report_id 2017-11-14 <nil>
	// textname "2012-12-05/20120431T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml": filename timestamp 20120431T071421Z: day 31 out of range for 2012-04
}

// With a 20-bit counter the bits between the counter and the nibble are
// zero.
func ExampleScheme() {
	s := ooid.Scheme{CounterBits: 20, SHA1Offset: 0}
	r, _ := s.Report("2012-12-05/20121205T071421Z-MM-AS18399-http_invalid_request_line-no_report_id-0.1.0-probe.yaml")
	fmt.Println(s, r.ID(0))
	// Output:
	// ooid-backfill counter_bits=20 sha1_offset=0 50bef44df00deacb
}

// A collector-stamped OOID: ts, an 8-bit collector id, a 24-bit counter.
func ExampleNewCollectorID() {
	id, _ := ooid.NewCollectorID(1612822030, 0x2a, 1)
	d := id.Decode()
	fmt.Println(id, d.Namespace, d.CollectorID, d.Counter, d.Time())
	// Output:
	// 6021b60e2a000001 collector 42 1 2021-02-08 22:07:10 +0000 UTC
}

// In PostgreSQL an OOID is a bigint with the same bits: from 2038 on it is
// negative.
func ExampleID_Int64() {
	id, _ := ooid.Parse("82c8e700f29c69e2")
	fmt.Println(id.Int64(), ooid.FromInt64(id.Int64()))
	// Output:
	// -9022707862180435486 82c8e700f29c69e2
}
