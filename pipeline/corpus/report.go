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

	size int64 // bytes, from a dry run
}

var (
	yamlBanner   = []byte("###########################################\n# OONI Probe Report for a synthetic test\n# Thu Jan  1 00:00:00 1970\n###########################################\n")
	nullDocument = []byte("---\nnull\n...\n")
	badHeader    = []byte("---\nprobe_asn: [AS1, \n...\n")
	garbageLine  = []byte("garbage between documents\n")
	badUTF8JSON  = []byte("{\"body\": \"Reykjav\xedk \xed\xa0\x80\"}")
	badUTF8YAML  = []byte("---\nbody: \"Reykjav\xedk\"\n...\n")
)

// ends receives the offset in the report just after each measurement's
// terminator.
type ends func(i int, off int64)

// write writes the report to w. mark, when not nil, learns where each
// measurement ends.
func (r *report) write(w io.Writer, mark ends) error {
	cw := &countWriter{w: w}
	rng := rand.New(rand.NewPCG(r.seed, 7))
	put := func(b []byte) { cw.Write(b) }
	if r.kind == "yaml" {
		if r.quirks && rng.IntN(2) == 0 {
			put(yamlBanner)
		}
		if r.corrupt == KindBadYAMLHeader {
			put(badHeader)
		} else {
			put(r.tmpl.header)
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
		last := i == r.n-1
		switch {
		case r.corrupt == KindTruncatedReport && last:
			blob := r.tmpl.blob
			put(blob[:len(blob)/2])
			continue
		case r.corrupt == KindHugeBlob && i == r.at:
			r.writeHuge(cw)
		case r.corrupt == KindInvalidUTF8 && i == r.at:
			if r.kind == "json" {
				put(badUTF8JSON)
				put([]byte("\n"))
			} else {
				put(badUTF8YAML)
			}
		default:
			put(r.tmpl.blob)
			if r.kind == "json" {
				put([]byte("\n"))
			}
		}
		if mark != nil {
			mark(i, cw.n)
		}
	}
	return cw.err
}

func (r *report) writeHuge(w io.Writer) {
	open, end := []byte(`{"body": "`), []byte("\"}\n")
	if r.kind == "yaml" {
		open, end = []byte("---\nbody: "), []byte("\n...\n")
	}
	w.Write(open)
	fill := make([]byte, 64<<10)
	for i := range fill {
		fill[i] = 'x'
	}
	for left := r.hugeSize - int64(len(open)+len(end)); left > 0; {
		k := min(left, int64(len(fill)))
		w.Write(fill[:k])
		left -= k
	}
	w.Write(end)
}

// measure sets r.size with a dry run.
func (r *report) measure() {
	cw := &countWriter{w: io.Discard}
	r.write(cw, nil)
	r.size = cw.n
}

// endOf returns the offset just after measurement i's terminator.
func (r *report) endOf(i int) int64 {
	var at int64 = -1
	r.write(io.Discard, func(j int, off int64) {
		if j == i {
			at = off
		}
	})
	return at
}

// kept is how many measurements of the report get IDs, as DESIGN.md §2
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
