package ooid

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/binary"
	"testing"
)

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

// Per-report cost of the counter base alone, the SHA-1 window beside
// SipHash-2-4 under a key table with overrides, and HMAC-SHA1 (the other
// keyed hash one could pick) for comparison; then the whole per-report
// setup (parse and hash) of the two schemes.
//
//	go test -run '^$' -bench 'BenchmarkCounterBase|BenchmarkReportSetupKeyed' ./pipeline/ooid/
func BenchmarkCounterBase(b *testing.B) {
	name := []byte(goodTimed)
	kt, err := NewKeyTable("bench", 1, []Override{{TS: 1, Index: 2}, {TS: 2, Index: 3}})
	if err != nil {
		b.Fatal(err)
	}
	var sink uint32
	b.Run("hash=sha1-window", func(b *testing.B) {
		for b.Loop() {
			sum := sha1.Sum(name)
			sink ^= Window(&sum, 33)
		}
	})
	b.Run("hash=siphash-2-4", func(b *testing.B) {
		for b.Loop() {
			sink ^= uint32(SipHash24(kt.KeyFor(1354691661), name))
		}
	})
	b.Run("hash=hmac-sha1", func(b *testing.B) {
		kb := kt.KeyFor(1354691661).Bytes()
		for b.Loop() {
			m := hmac.New(sha1.New, kb[:])
			m.Write(name)
			sink ^= binary.BigEndian.Uint32(m.Sum(nil))
		}
	})
	if sink == 0 {
		b.Log(sink)
	}
}

func BenchmarkReportSetupKeyed(b *testing.B) {
	name := []byte(goodTimed)
	kt, err := NewKeyTable("bench", 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range []Scheme{DefaultScheme, KeyedScheme(24, kt)} {
		hash := HashSHA1Window
		if s.Keyed() {
			hash = HashSipHash
		}
		b.Run("hash="+hash, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.ReportBytes(name); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
		})
	}
}
