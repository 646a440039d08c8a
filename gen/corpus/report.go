package corpus

import (
	"io"
	"math/rand/v2"
)

// A report plan: what one synthetic raw report holds. write produces its
// bytes; the plan alone gives the ground truth.
type report struct {
	textname string
	bucket   string
	testName string
	basename string
	kind     string
	tmpl     *template
	n        int    // measurement blobs written (before corruption takes any away)
	seed     uint64 // for the quirks (comments, null documents, duplicate trailers)
	quirks   bool
	corrupt  string // report-level corruption kind, "" for none
	at       int    // the measurement the corruption hits
	hugeSize int64
	varied   float64 // Config.Varied
	buf      []byte  // of a varied blob

	size int64 // bytes, from a dry run
}

var (
	yamlBanner   = []byte("###########################################\n# OONI Probe Report for a synthetic test\n# Thu Jan  1 00:00:00 1970\n###########################################\n")
	nullDocument = []byte("---\nnull\n...\n")
	badHeader    = []byte("---\nprobe_asn: [AS1, \n...\n")
	garbageLine  = []byte("garbage between documents\n")
	badUTF8JSON  = []byte("{\"body\": \"Reykjav\xedk \xed\xa0\x80\"}")
	badUTF8YAML  = []byte("---\nbody: \"Reykjav\xedk\"\n...\n")
	badJSON      = []byte(`{"body": [1, 2}`)
	badYAML      = []byte("---\nbody: [1, \n...\n")
)

// marks receives, for each measurement written, its number, where its
// blob starts in the report and the offset just after its terminator; for
// a YAML report, number -1 is the header document. A truncated last blob
// has no terminator: its end is the end of the report.
type marks func(i int, start, end int64)

// Blob kinds of a measurement, as the plan decides them.
const (
	blobNormal    = iota
	blobTruncated // the cut-off last document of a truncated report: no measurement
	blobHuge
	blobBadUTF8
	blobBad // does not parse: an autoclaved badblob
)

func (r *report) blobKind(i int) int {
	switch {
	case r.corrupt == KindTruncatedReport && i == r.n-1:
		return blobTruncated
	case r.corrupt == KindHugeBlob && i == r.at:
		return blobHuge
	case r.corrupt == KindInvalidUTF8 && i == r.at:
		return blobBadUTF8
	case r.corrupt == KindBadblob && i == r.at:
		return blobBad
	}
	return blobNormal
}

// writeBlob writes measurement i's blob: a JSON line without its "\n",
// or a YAML document with its markers.
func (r *report) writeBlob(w *countWriter, i int) {
	switch r.blobKind(i) {
	case blobTruncated:
		w.put(r.tmpl.blob[:len(r.tmpl.blob)/2])
	case blobHuge:
		r.writeHuge(w)
	case blobBadUTF8:
		if r.kind == "json" {
			w.put(badUTF8JSON)
		} else {
			w.put(badUTF8YAML)
		}
	case blobBad:
		if r.kind == "json" {
			w.put(badJSON)
		} else {
			w.put(badYAML)
		}
	default:
		if r.varied > 0 && len(r.tmpl.vary) > 0 {
			r.buf = varied(r.buf, r.tmpl.blob, r.tmpl.vary, r.varied, rand.New(rand.NewPCG(r.seed, uint64(i))))
			w.put(r.buf)
			return
		}
		w.put(r.tmpl.blob)
	}
}

// write writes the report to w. mark, when not nil, learns where each
// measurement is.
func (r *report) write(w io.Writer, mark marks) error {
	cw := &countWriter{w: w}
	rng := rand.New(rand.NewPCG(r.seed, 7))
	put := func(b []byte) { cw.put(b) }
	if r.kind == "yaml" {
		if r.quirks && rng.IntN(2) == 0 {
			put(yamlBanner)
		}
		start := cw.n
		if r.corrupt == KindBadYAMLHeader {
			put(badHeader)
		} else {
			put(r.tmpl.header)
		}
		if mark != nil {
			mark(-1, start, cw.n)
		}
	}
	for i := range r.n {
		if r.corrupt == KindBrokenFrame && i == r.at {
			if r.kind == "json" {
				put([]byte("\n")) // a blank line: the rest of the report is cut off
			} else {
				put(garbageLine)
			}
		}
		if r.kind == "yaml" && r.quirks {
			switch rng.IntN(8) {
			case 0:
				put(nullDocument)
			case 1:
				put([]byte("# a comment between documents\n"))
			case 2:
				put([]byte("...\n")) // a duplicate trailer
			}
		}
		start := cw.n
		r.writeBlob(cw, i)
		if r.kind == "json" && r.blobKind(i) != blobTruncated {
			put([]byte("\n"))
		}
		if mark != nil {
			mark(i, start, cw.n)
		}
	}
	return cw.err
}

func (r *report) writeHuge(w *countWriter) {
	open, end := []byte(`{"body": "`), []byte(`"}`) // the line's "\n" is the caller's
	if r.kind == "yaml" {
		open, end = []byte("---\nbody: "), []byte("\n...\n")
	}
	w.put(open)
	fill := make([]byte, 64<<10)
	for i := range fill {
		fill[i] = 'x'
	}
	size := r.hugeSize
	if r.kind == "json" {
		size-- // the "\n"
	}
	for left := size - int64(len(open)+len(end)); left > 0; {
		k := min(left, int64(len(fill)))
		w.put(fill[:k])
		left -= k
	}
	w.put(end)
}

// measure sets r.size with a dry run.
func (r *report) measure() {
	cw := &countWriter{w: io.Discard}
	_ = r.write(cw, nil) // io.Discard does not fail
	r.size = cw.n
}

// endOf returns the offset just after measurement i's terminator.
func (r *report) endOf(i int) int64 {
	var at int64 = -1
	_ = r.write(io.Discard, func(j int, _, end int64) { // io.Discard does not fail
		if j == i {
			at = end
		}
	})
	return at
}

// kept is how many measurements of the report get IDs, as docs/design.md §2
// numbers them.
func (r *report) kept() int {
	switch r.corrupt {
	case KindBadTextname, KindBadYAMLHeader, KindNotInContainer:
		return 0
	case KindBrokenFrame:
		return r.at
	case KindTruncatedReport:
		return r.n - 1
	}
	return r.n
}

// badblobs is how many of the kept measurements are badblobs.
func (r *report) badblobs() int {
	if r.corrupt == KindBadblob {
		return 1
	}
	return 0
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// put writes p; the first error stays in c.err, which the writer of the
// whole returns.
func (c *countWriter) put(p []byte) { _, _ = c.Write(p) }
