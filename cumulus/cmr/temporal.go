// Package cmr reads the temporal values of a granule from its CMR metadata
// file (ECHO10 XML, UMM-G JSON or ISO 19115 XML) with the rules of
// Cumulus's getGranuleTemporalInfo (@cumulus/cmrjs 21), quirks included,
// and normalises them as Cumulus's granule write does.
package cmr

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Format is the kind of a CMR file, told by its name.
type Format string

const (
	ECHO10 Format = "echo10"
	UMMG   Format = "umm-g"
	ISO    Format = "iso"
)

// FormatOf tells the format from a file's name or location as Cumulus
// does: ending in "cmr_iso.xml" (ISO), "cmr.xml" (ECHO10) or "cmr.json"
// (UMM-G). A plain ".iso.xml" is none of them.
func FormatOf(name string) (Format, bool) {
	switch {
	case strings.HasSuffix(name, "cmr_iso.xml"):
		return ISO, true
	case strings.HasSuffix(name, "cmr.xml"):
		return ECHO10, true
	case strings.HasSuffix(name, "cmr.json"):
		return UMMG, true
	}
	return "", false
}

// Temporal holds the four values as read from the file, before
// normalisation.
type Temporal struct {
	BeginningDateTime  Value
	EndingDateTime     Value
	ProductionDateTime Value
	LastUpdateDateTime Value
}

// Dates are the four values normalised.
type Dates struct {
	BeginningDateTime  Date
	EndingDateTime     Date
	ProductionDateTime Date
	LastUpdateDateTime Date
}

// Fields names the four values in the order of Temporal.
var Fields = [4]string{"beginningDateTime", "endingDateTime", "productionDateTime", "lastUpdateDateTime"}

func (t *Temporal) values() [4]Value {
	return [4]Value{t.BeginningDateTime, t.EndingDateTime, t.ProductionDateTime, t.LastUpdateDateTime}
}

// Normalize normalises the four values; an invalid date is an error that
// names its field, as it fails the granule's write in Cumulus.
func (t *Temporal) Normalize() (Dates, error) {
	var d [4]Date
	for i, v := range t.values() {
		var err error
		if d[i], err = v.Normalize(); err != nil {
			return Dates{}, fmt.Errorf("%s %v: %w", Fields[i], v, err)
		}
	}
	return Dates{d[0], d[1], d[2], d[3]}, nil
}

// MaxSize bounds a CMR file by default; real ones are 1 KB to a few MB.
const MaxSize = 16 << 20

// ErrTooLarge is the error of a file over the size bound.
var ErrTooLarge = errors.New("larger than the CMR file size bound")

// Read reads the temporal values of a CMR file of the given format from r,
// reading at most maxSize bytes (MaxSize when 0). A file that Cumulus's
// code would fail on (a TypeError there: no root element of the format,
// an ISO file with a single identificationInfo, UMM-G without
// ProviderDates) is an error, as is malformed or hostile input.
func Read(r io.Reader, f Format, maxSize int64) (Temporal, error) {
	if maxSize <= 0 {
		maxSize = MaxSize
	}
	lr := &limitedReader{r: r, left: maxSize}
	var t Temporal
	var err error
	switch f {
	case ECHO10:
		t, err = readECHO10(lr)
	case ISO:
		t, err = readISO(lr)
	case UMMG:
		t, err = readUMMG(lr)
	default:
		return t, fmt.Errorf("unknown CMR format %q", f)
	}
	if lr.over {
		return Temporal{}, fmt.Errorf("%w (%d bytes)", ErrTooLarge, maxSize)
	}
	return t, err
}

// limitedReader fails past its bound, so that a huge file is an error and
// not a cut one parsed as complete.
type limitedReader struct {
	r    io.Reader
	left int64
	over bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		var one [1]byte
		if n, _ := l.r.Read(one[:]); n > 0 {
			l.over = true
			return 0, ErrTooLarge
		}
		return l.r.Read(p[:0])
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// or is JavaScript's a || b.
func or(a, b Value) Value {
	if a.truthy() {
		return a
	}
	return b
}

var echo10Paths = watchPaths(
	"Granule/Temporal/RangeDateTime/BeginningDateTime",
	"Granule/Temporal/RangeDateTime/EndingDateTime",
	"Granule/Temporal/SingleDateTime",
	"Granule/DataGranule/ProductionDateTime",
	"Granule/LastUpdate",
	"Granule/InsertTime",
)

func readECHO10(r io.Reader) (Temporal, error) {
	doc, err := parseXML(r, echo10Paths)
	if err != nil {
		return Temporal{}, err
	}
	g := doc.get("Granule")
	if len(g) == 0 {
		return Temporal{}, errors.New("ECHO10: the root element is not <Granule>")
	}
	var t Temporal
	t.BeginningDateTime = g.get("Temporal", "RangeDateTime", "BeginningDateTime").value()
	t.EndingDateTime = g.get("Temporal", "RangeDateTime", "EndingDateTime").value()
	if !t.BeginningDateTime.truthy() {
		single := g.get("Temporal", "SingleDateTime").value()
		t.BeginningDateTime, t.EndingDateTime = single, single
	}
	t.ProductionDateTime = g.get("DataGranule", "ProductionDateTime").value()
	t.LastUpdateDateTime = or(g.get("LastUpdate").value(), g.get("InsertTime").value())
	return t, nil
}

const (
	isoMI       = "gmd:DS_Series/gmd:composedOf/gmd:DS_DataSet/gmd:has/gmi:MI_Metadata"
	isoExtent   = "gmd:MD_DataIdentification/gmd:extent/gmd:EX_Extent/gmd:temporalElement/gmd:EX_TemporalExtent/gmd:extent"
	isoCitation = "gmd:MD_DataIdentification/gmd:citation/gmd:CI_Citation"
	isoProduced = "gmd:dataQualityInfo/gmd:DQ_DataQuality/gmd:lineage/gmd:LI_Lineage/gmd:processStep/gmi:LE_ProcessStep/gmd:dateTime/gco:DateTime"
)

var isoPaths = watchPaths(
	isoMI+"/gmd:identificationInfo/"+isoExtent+"/gml:TimePeriod/gml:beginPosition",
	isoMI+"/gmd:identificationInfo/"+isoExtent+"/gml:TimePeriod/gml:endPosition",
	isoMI+"/gmd:identificationInfo/"+isoExtent+"/gml:TimeInstant/gml:timePosition",
	isoMI+"/gmd:identificationInfo/"+isoCitation+"/gmd:title/gco:CharacterString",
	isoMI+"/gmd:identificationInfo/"+isoCitation+"/gmd:date/gmd:CI_Date/gmd:date/gco:DateTime",
	isoMI+"/"+isoProduced,
)

func path(p string) []string { return strings.Split(p, "/") }

func readISO(r io.Reader) (Temporal, error) {
	doc, err := parseXML(r, isoPaths)
	if err != nil {
		return Temporal{}, err
	}
	mi := doc.get(path(isoMI)...)
	if len(mi) == 0 {
		return Temporal{}, errors.New("ISO: no " + strings.ReplaceAll(isoMI, "/", " > "))
	}
	info := mi.get("gmd:identificationInfo")
	if len(info) < 2 {
		// Cumulus calls info.find: with one element xml2js made an object,
		// with none it is undefined; either way it throws.
		return Temporal{}, fmt.Errorf("ISO: %d gmd:identificationInfo elements; Cumulus reads only files with several", len(info))
	}
	// Cumulus looks for the data identification with a predicate that
	// returns an array, always truthy: it takes the first element.
	ext := nodes{info[0]}.get(path(isoExtent)...)
	var t Temporal
	period := ext.get("gml:TimePeriod")
	t.BeginningDateTime = period.get("gml:beginPosition").value()
	t.EndingDateTime = period.get("gml:endPosition").value()
	if !t.BeginningDateTime.truthy() {
		single := ext.get("gml:TimeInstant", "gml:timePosition").value()
		t.BeginningDateTime, t.EndingDateTime = single, single
	}
	t.ProductionDateTime = mi.get(path(isoProduced)...).value()
	for _, el := range info {
		citation := nodes{el}.get(path(isoCitation)...)
		if title := citation.get("gmd:title", "gco:CharacterString").value(); title.Kind == String && title.Str == "UpdateTime" {
			t.LastUpdateDateTime = citation.get("gmd:date", "gmd:CI_Date", "gmd:date", "gco:DateTime").value()
			break
		}
	}
	return t, nil
}
