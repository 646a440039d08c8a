package cmr

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// variant is a fixture changed by edits (regexp → replacement, in order),
// with the four values stored for it ("-" absent, "null"), or an error.
// Cumulus v21's own code (getGranuleTemporalInfo of @cumulus/cmrjs, then
// getGranuleCmrTemporalInfo of @cumulus/message) gives these values, and
// throws for the errors; testdata/cumulus-oracle.js reruns it on the
// variants that BACKFILL_CMR_VARIANTS=DIR writes.
type variant struct {
	name, base string
	edits      []string
	want       [4]string
	err        string
}

const (
	echoBase = "MOD09GQ.A2016358.h13v04.006.2016360104606.cmr.xml"
	ummgBase = "ascat_20121029_010301_metopb_00588_eps_o_coa_2101_ovw.l2.cmr.json"
	isoBase  = "ATL03_timeperiod.cmr_iso.xml"
	isoInst  = "ATL03_timeinstant.cmr_iso.xml"
)

var (
	echoRange = `(?s)<RangeDateTime>.*</RangeDateTime>`
	echoWant  = [4]string{"2016-12-23T13:45:00.000Z", "2016-12-23T17:05:00.000Z", "2016-12-25T10:46:06.000Z", "2018-04-26T21:33:43.913Z"}
	ummgDates = `"ProviderDates":\[[^\]]*\]`
	ummgRange = `"TemporalExtent":\{[^}]*\}\}`
	ummgWant  = [4]string{"2012-10-29T01:03:01.000Z", "2012-10-29T02:41:59.000Z", "2013-06-10T11:00:43.000Z", "2021-06-28T05:58:41.723Z"}
	isoWant   = [4]string{"2019-01-01T00:04:18.809Z", "2019-01-01T00:11:20.899Z", "2021-02-05T04:23:58.000Z", "2021-05-08T10:11:12.345Z"}
	isoUpdate = `(?s)(<gco:CharacterString>)UpdateTime(</gco:CharacterString>\s*</gmd:title>)`
)

func dates(b, e, p, l string) [4]string { return [4]string{b, e, p, l} }

var variants = []variant{
	// ECHO10
	{"echo10 single date-time", echoBase, []string{echoRange, "<SingleDateTime>2016-12-23T15:00:00Z</SingleDateTime>"},
		dates("2016-12-23T15:00:00.000Z", "2016-12-23T15:00:00.000Z", echoWant[2], echoWant[3]), ""},
	{"echo10 range beats single", echoBase, []string{`</RangeDateTime>`, "</RangeDateTime><SingleDateTime>2000-01-01T00:00:00Z</SingleDateTime>"},
		echoWant, ""},
	{"echo10 no LastUpdate: InsertTime", echoBase, []string{`<LastUpdate>.*</LastUpdate>`, ""},
		dates(echoWant[0], echoWant[1], echoWant[2], "2018-04-26T21:33:43.913Z"), ""},
	{"echo10 empty LastUpdate: InsertTime", echoBase, []string{`<LastUpdate>.*</LastUpdate>`, "<LastUpdate/>", `<InsertTime>.*</InsertTime>`, "<InsertTime>2017-01-02T03:04:05.6+01:00</InsertTime>"},
		dates(echoWant[0], echoWant[1], echoWant[2], "2017-01-02T02:04:05.600Z"), ""},
	{"echo10 neither: absent", echoBase, []string{`<LastUpdate>.*</LastUpdate>`, "", `<InsertTime>.*</InsertTime>`, ""},
		dates(echoWant[0], echoWant[1], echoWant[2], "-"), ""},
	{"echo10 no begin: single for both, none here", echoBase, []string{`<BeginningDateTime>.*</BeginningDateTime>`, ""},
		dates("-", "-", echoWant[2], echoWant[3]), ""},
	{"echo10 empty begin, empty single", echoBase, []string{`<BeginningDateTime>.*</BeginningDateTime>`, "<BeginningDateTime></BeginningDateTime>", `</RangeDateTime>`, "</RangeDateTime><SingleDateTime/>"},
		dates("null", "null", echoWant[2], echoWant[3]), ""},
	{"echo10 two RangeDateTime: an array, nothing read", echoBase, []string{`(?s)(<RangeDateTime>.*</RangeDateTime>)`, "$1$1"},
		dates("-", "-", echoWant[2], echoWant[3]), ""},
	{"echo10 offsets and no fraction", echoBase, []string{`2016-12-23T13:45:00.000000Z`, "2016-12-23T13:45:00-05:30", `2016-12-23T17:05:00.000000Z`, "2016-12-23 17:05"},
		dates("2016-12-23T19:15:00.000Z", "2016-12-23T17:05:00.000Z", echoWant[2], echoWant[3]), ""},
	{"echo10 attributes, comments and CDATA", echoBase, []string{`<BeginningDateTime>2016`, `<BeginningDateTime a="1"><!-- c --><![CDATA[2016]]>`},
		echoWant, ""},
	{"echo10 blank begin is a string", echoBase, []string{`<BeginningDateTime>.*</BeginningDateTime>`, "<BeginningDateTime>  </BeginningDateTime>"},
		[4]string{}, `beginningDateTime "  "`},
	{"echo10 begin with a child element", echoBase, []string{`<BeginningDateTime>.*</BeginningDateTime>`, "<BeginningDateTime><x>2016-01-01</x></BeginningDateTime>"},
		[4]string{}, "beginningDateTime object"},
	{"echo10 not a date", echoBase, []string{`2016-12-25T10:46:06.000Z`, "2016-12-25T10:46:06.000 UTC"},
		[4]string{}, "productionDateTime"},
	{"echo10 another root", echoBase, []string{`<Granule>`, "<Collection>", `</Granule>`, "</Collection>"},
		[4]string{}, "not <Granule>"},
	{"echo10 empty Granule", echoBase, []string{`(?s)<Granule>.*</Granule>`, "<Granule/>"},
		dates("-", "-", "-", "-"), ""},

	// UMM-G
	{"umm-g single date-time", ummgBase, []string{ummgRange, `"TemporalExtent":{"SingleDateTime":"2012-10-29T01:30:00Z"}`},
		dates("2012-10-29T01:30:00.000Z", "2012-10-29T01:30:00.000Z", ummgWant[2], ummgWant[3]), ""},
	{"umm-g null begin: single", ummgBase, []string{ummgRange, `"TemporalExtent":{"RangeDateTime":{"BeginningDateTime":null,"EndingDateTime":"2013-01-01T00:00:00Z"},"SingleDateTime":"2012-10-29T01:30:00.5+01:00"}`},
		dates("2012-10-29T00:30:00.500Z", "2012-10-29T00:30:00.500Z", ummgWant[2], ummgWant[3]), ""},
	{"umm-g null begin, no single", ummgBase, []string{ummgRange, `"TemporalExtent":{"RangeDateTime":{"BeginningDateTime":null}}`},
		dates("-", "-", ummgWant[2], ummgWant[3]), ""},
	{"umm-g numbers are epoch milliseconds", ummgBase, []string{ummgRange, `"TemporalExtent":{"RangeDateTime":{"BeginningDateTime":1351472581000,"EndingDateTime":null}}`},
		dates("2012-10-29T01:03:01.000Z", "null", ummgWant[2], ummgWant[3]), ""},
	{"umm-g Update after Insert", ummgBase, []string{ummgDates, `"ProviderDates":[{"Type":"Create","Date":"2020-01-01T00:00:00Z"},{"Type":"Insert","Date":"2020-01-02T00:00:00Z"},{"Type":"Update","Date":"2020-01-03T00:00:00Z"},{"Type":"Update","Date":"2020-01-04T00:00:00Z"}]`},
		dates(ummgWant[0], ummgWant[1], ummgWant[2], "2020-01-03T00:00:00.000Z"), ""},
	{"umm-g first Insert, not the latest", ummgBase, []string{ummgDates, `"ProviderDates":[{"Type":"Create","Date":"2020-01-01T00:00:00Z"},{"Type":"Insert","Date":"2020-01-05T00:00:00Z"},{"Type":"Insert","Date":"2020-01-09T00:00:00Z"}]`},
		dates(ummgWant[0], ummgWant[1], ummgWant[2], "2020-01-05T00:00:00.000Z"), ""},
	{"umm-g only Create", ummgBase, []string{ummgDates, `"ProviderDates":[{"Type":"Review","Date":"2021-01-01T00:00:00Z"},{"Type":"Create","Date":"2020-01-01T00:00:00Z"}]`},
		dates(ummgWant[0], ummgWant[1], ummgWant[2], "2020-01-01T00:00:00.000Z"), ""},
	{"umm-g none of the three", ummgBase, []string{ummgDates, `"ProviderDates":[{"Type":"Review","Date":"2021-01-01T00:00:00Z"},7]`},
		dates(ummgWant[0], ummgWant[1], ummgWant[2], "-"), ""},
	{"umm-g Update without Date", ummgBase, []string{ummgDates, `"ProviderDates":[{"Type":"Insert","Date":"2021-01-01T00:00:00Z"},{"Type":"Update"}]`},
		dates(ummgWant[0], ummgWant[1], ummgWant[2], "-"), ""},
	{"umm-g Update before a null entry", ummgBase, []string{ummgDates, `"ProviderDates":[{"Type":"Update","Date":"2021-01-01T00:00:00Z"},null]`},
		dates(ummgWant[0], ummgWant[1], ummgWant[2], "2021-01-01T00:00:00.000Z"), ""},
	{"umm-g null entry before any match", ummgBase, []string{ummgDates, `"ProviderDates":[{"Type":"Insert","Date":"2021-01-01T00:00:00Z"},null]`},
		[4]string{}, "ProviderDates[1] is null"},
	{"umm-g no ProviderDates", ummgBase, []string{`,` + ummgDates, ""},
		[4]string{}, "ProviderDates is missing"},
	{"umm-g ProviderDates an object", ummgBase, []string{ummgDates, `"ProviderDates":{"Type":"Update"}`},
		[4]string{}, "ProviderDates is missing or not an array"},
	{"umm-g not an object", ummgBase, []string{`(?s)^.*$`, `[1,2]`},
		[4]string{}, "not a JSON object"},
	{"umm-g malformed", ummgBase, []string{`\}\s*$`, ""},
		[4]string{}, "UMM-G: unexpected end of JSON input"},

	// ISO
	{"iso time instant", isoInst, nil,
		dates("2022-01-18T00:04:18.000Z", "2022-01-18T00:04:18.000Z", isoWant[2], isoWant[3]), ""},
	{"iso one identificationInfo", isoBase, []string{`(?s)(</gmd:identificationInfo>).*(<gmd:dataQualityInfo>)`, "$1$2"},
		[4]string{}, "1 gmd:identificationInfo elements"},
	{"iso the first identificationInfo only", isoBase, []string{`(?s)(<gmd:identificationInfo>.*?</gmd:identificationInfo>)(.*?)(</gmi:MI_Metadata>)`, "$2$1$3"},
		dates("-", "-", isoWant[2], isoWant[3]), ""},
	{"iso no UpdateTime citation", isoBase, []string{isoUpdate, "${1}RevisionTime$2"},
		dates(isoWant[0], isoWant[1], isoWant[2], "-"), ""},
	{"iso UpdateTime not trimmed", isoBase, []string{isoUpdate, "$1 UpdateTime $2"},
		dates(isoWant[0], isoWant[1], isoWant[2], "-"), ""},
	{"iso two process steps", isoBase, []string{`(?s)(<gmd:processStep>.*</gmd:processStep>)`, "$1$1"},
		dates(isoWant[0], isoWant[1], "-", isoWant[3]), ""},
	{"iso no end position", isoBase, []string{`<gml:endPosition>.*</gml:endPosition>`, ""},
		dates(isoWant[0], "-", isoWant[2], isoWant[3]), ""},
	{"iso another root", isoBase, []string{`gmd:DS_Series`, "gmd:MD_Metadata"},
		[4]string{}, "ISO: no gmd:DS_Series"},
}

func TestRead_Variants(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", v.base))
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			for i := 0; i < len(v.edits); i += 2 {
				re := regexp.MustCompile(v.edits[i])
				if !re.MatchString(text) {
					t.Fatalf("edit %q matches nothing", v.edits[i])
				}
				text = re.ReplaceAllString(text, v.edits[i+1])
			}
			if dir := os.Getenv("BACKFILL_CMR_VARIANTS"); dir != "" {
				dumpVariant(t, dir, v.name, v.base, text)
			}
			f, _ := FormatOf(v.base)
			tm, err := Read(strings.NewReader(text), f, 0)
			var d Dates
			if err == nil {
				d, err = tm.Normalize()
			}
			if v.err != "" {
				if err == nil || !strings.Contains(err.Error(), v.err) {
					t.Fatalf("error %v, want one with %q", err, v.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, got := range [4]Date{d.BeginningDateTime, d.EndingDateTime, d.ProductionDateTime, d.LastUpdateDateTime} {
				if s := dateString(got); s != v.want[i] {
					t.Errorf("%s = %s, want %s", Fields[i], s, v.want[i])
				}
			}
		})
	}
}

// dumpVariant writes a variant for testdata/cumulus-oracle.js, which runs
// Cumulus's own code on it.
func dumpVariant(t *testing.T, dir, name, base, text string) {
	f, _ := FormatOf(base)
	ending := map[Format]string{ECHO10: ".cmr.xml", UMMG: ".cmr.json", ISO: ".cmr_iso.xml"}[f]
	name = regexp.MustCompile(`\W+`).ReplaceAllString(name, "_") + ending
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func dateString(d Date) string {
	switch {
	case !d.Set:
		return "-"
	case d.Null:
		return "null"
	}
	return d.ISO
}
