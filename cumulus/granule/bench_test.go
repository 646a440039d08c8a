package granule

import (
	"fmt"
	"testing"
)

// IDs per second on one core, against the naive computation
// (crypto/md5 + encoding/base64 + strings.ReplaceAll + concatenation):
//
//	go test -run '^$' -bench UniqueGranuleID -benchmem -cpu 1 ./cumulus/granule/
func BenchmarkUniqueGranuleID(b *testing.B) {
	id := "MOD09GQ.A2017224.h09v02.006.2017227165020"
	collections := make([]string, 64)
	for i := range collections {
		collections[i] = fmt.Sprintf("MOD09GQ___%03d", i)
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
	}
	b.Run("impl=naive/mode=deterministic", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			_ = naive(id, collections[i%len(collections)], 8)
			i++
		}
		report(b)
	})
	b.Run("impl=func/mode=deterministic", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := UniqueGranuleID(id, collections[i%len(collections)], 8, false); err != nil {
				b.Fatal(err)
			}
			i++
		}
		report(b)
	})
	b.Run("impl=generator/mode=deterministic/collections=64", func(b *testing.B) {
		g, _ := NewGenerator(8, false)
		idb := []byte(id)
		cs := make([][]byte, len(collections))
		for i, c := range collections {
			cs[i] = []byte(c)
		}
		b.ReportAllocs()
		buf := make([]byte, 0, 64)
		i := 0
		for b.Loop() {
			buf, _ = g.Append(buf[:0], idb, cs[i%len(cs)])
			i++
		}
		report(b)
	})
	b.Run("impl=generator/mode=deterministic/collections=1", func(b *testing.B) {
		g, _ := NewGenerator(8, false)
		idb, cb := []byte(id), []byte(collections[0])
		b.ReportAllocs()
		buf := make([]byte, 0, 64)
		for b.Loop() {
			buf, _ = g.Append(buf[:0], idb, cb)
		}
		report(b)
	})
	b.Run("impl=naive/mode=timestamped", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = naive(id, collections[0]+"_"+fmt.Sprint(Nanotime()), 8)
		}
		report(b)
	})
	b.Run("impl=func/mode=timestamped", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := UniqueGranuleID(id, collections[0], 8, true); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("impl=generator/mode=timestamped", func(b *testing.B) {
		g, _ := NewGenerator(8, true)
		idb, cb := []byte(id), []byte(collections[0])
		b.ReportAllocs()
		buf := make([]byte, 0, 64)
		for b.Loop() {
			buf, _ = g.Append(buf[:0], idb, cb)
		}
		report(b)
	})
}
