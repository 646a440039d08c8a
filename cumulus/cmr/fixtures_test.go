package cmr

import (
	"os"
	"path/filepath"
	"testing"
)

// fixtures: each real CMR file with the raw values Cumulus v21's
// getGranuleTemporalInfo returns for it, then the values stored.
var fixtures = []struct {
	file       string
	format     Format
	raw, store [4]string
}{
	{"ATL03_timeinstant.cmr_iso.xml", ISO,
		[4]string{"2022-01-18T00:04:18.000Z", "2022-01-18T00:04:18.000Z", "2021-02-05T04:23:58.000000Z", "2021-05-08T10:11:12.345678Z"},
		[4]string{"2022-01-18T00:04:18.000Z", "2022-01-18T00:04:18.000Z", "2021-02-05T04:23:58.000Z", "2021-05-08T10:11:12.345Z"}},
	{"ATL03_timeperiod.cmr_iso.xml", ISO,
		[4]string{"2019-01-01T00:04:18.809303Z", "2019-01-01T00:11:20.899913Z", "2021-02-05T04:23:58.000000Z", "2021-05-08T10:11:12.345678Z"},
		[4]string{"2019-01-01T00:04:18.809Z", "2019-01-01T00:11:20.899Z", "2021-02-05T04:23:58.000Z", "2021-05-08T10:11:12.345Z"}},
	{"MOD09GQ.A2016358.h13v04.006.2016360104606.cmr.xml", ECHO10,
		[4]string{"2016-12-23T13:45:00.000000Z", "2016-12-23T17:05:00.000000Z", "2016-12-25T10:46:06.000Z", "2018-04-26T21:33:43.913617"},
		[4]string{"2016-12-23T13:45:00.000Z", "2016-12-23T17:05:00.000Z", "2016-12-25T10:46:06.000Z", "2018-04-26T21:33:43.913Z"}},
	{"antarctica_ice_velocity_450m.nc.cmr.xml", ECHO10,
		[4]string{"1996-01-01T00:00:01.000000Z", "2011-12-31T23:59:59.000000Z", "2015-07-24T16:52:30.000Z", "2016-05-05T16:44:38.034Z"},
		[4]string{"1996-01-01T00:00:01.000Z", "2011-12-31T23:59:59.000Z", "2015-07-24T16:52:30.000Z", "2016-05-05T16:44:38.034Z"}},
	{"ascat_20121029_010301_metopb_00588_eps_o_coa_2101_ovw.l2.cmr.json", UMMG,
		[4]string{"2012-10-29T01:03:01.000Z", "2012-10-29T02:41:59.000Z", "2013-06-10T11:00:43.000Z", "2021-06-28T05:58:41.723Z"},
		[4]string{"2012-10-29T01:03:01.000Z", "2012-10-29T02:41:59.000Z", "2013-06-10T11:00:43.000Z", "2021-06-28T05:58:41.723Z"}},
}

func TestRead_Fixtures(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.file, func(t *testing.T) {
			if f, ok := FormatOf(fx.file); !ok || f != fx.format {
				t.Errorf("FormatOf = %q, %v; want %q", f, ok, fx.format)
			}
			tm := readFile(t, filepath.Join("testdata", fx.file), fx.format)
			for i, v := range tm.values() {
				if v.Kind != String || v.Str != fx.raw[i] {
					t.Errorf("%s = %v, want %q", Fields[i], v, fx.raw[i])
				}
			}
			d, err := tm.Normalize()
			if err != nil {
				t.Fatal(err)
			}
			for i, got := range [4]Date{d.BeginningDateTime, d.EndingDateTime, d.ProductionDateTime, d.LastUpdateDateTime} {
				if !got.Set || got.Null || got.ISO != fx.store[i] {
					t.Errorf("%s stored as %+v, want %q", Fields[i], got, fx.store[i])
				}
			}
		})
	}
}

func readFile(t testing.TB, path string, f Format) Temporal {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	tm, err := Read(file, f, 0)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tm
}
