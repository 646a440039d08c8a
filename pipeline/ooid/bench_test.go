package ooid

import "testing"

// Per-measurement OOID assignment. impl=fast is Report.ID on a report set up
// once; impl=naive is the baseline that parses the textname with the
// reference regexps and hashes it for every measurement, as a direct port of
// the ooni-uuid code would.
//
//	go test -run '^$' -bench 'BenchmarkAssign|BenchmarkReportSetup' -benchmem ./pipeline/ooid/
func BenchmarkAssign(b *testing.B) {
	b.Run("impl=fast", func(b *testing.B) {
		r, err := DefaultScheme.Report(goodTimed)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		var sink ID
		var ndx uint32
		for b.Loop() {
			sink ^= r.ID(ndx)
			ndx++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
		if sink == 0 && b.N > 1 {
			b.Log(sink)
		}
	})
	b.Run("impl=naive", func(b *testing.B) {
		b.ReportAllocs()
		var sink ID
		var ndx uint64
		for b.Loop() {
			id, err := refOOID(goodTimed, ndx, DefaultScheme)
			if err != nil {
				b.Fatal(err)
			}
			sink ^= id
			ndx++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
		if sink == 0 && b.N > 1 {
			b.Log(sink)
		}
	})
}

// Per-report setup: textname parse plus SHA-1.
func BenchmarkReportSetup(b *testing.B) {
	name := []byte(goodTimed)
	b.Run("impl=fast", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(name)))
		for b.Loop() {
			if _, err := DefaultScheme.ReportBytes(name); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
	})
	b.Run("impl=reference", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(name)))
		for b.Loop() {
			if _, err := refOOID(goodTimed, 0, DefaultScheme); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
	})
}
