// Package corpus generates synthetic OONI buckets, canned or autoclaved,
// byte-faithful to the real formats, with a ground truth to check a run
// against.
//
// A bucket is what the OONI canning step wrote: per test name, reports
// sorted by basename and cut into slices of under CanSize bytes, each a
// GNU tar (members named by textname, "././@LongLink" headers for long
// names, padded to 10240-byte records) in one LZ4 frame as the lz4 CLI
// writes it (4 MiB independent blocks, content checksum, no content
// size); single-report slices and reports of CanSize or more are stored
// as-is as <basename>.lz4. index.json.gz lists every container with
// sort_keys JSON, Python's separators, base64 SHA-1 and signed CRC-32.
//
// Reports are built from the real samples embedded in templates/: JSON
// measurement lines, and YAML headers and documents (with comment banners,
// null documents and duplicate trailers, which the slicer must skip).
// Measurements per report follow a Pareto law (most reports have tens, a
// few tens of thousands), capped at MaxMeasurements.
//
// Each corruption kind is applied at its rate (per report, or per tar
// container for the container kinds), and the ground truth says what a
// correct run must make of it: ground-truth.jsonl holds one row per
// report (and per damaged container) with the number of measurements that
// get IDs and the dead-letter reasons expected.
package corpus

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pierrec/lz4/v4"

	"github.com/backfill-dev/backfill/internal/lz4frame"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
)

// Corruption kinds: report level.
const (
	KindBadTextname     = "bad_textname"
	KindTruncatedReport = "truncated_report"
	KindBrokenFrame     = "broken_frame"
	KindBadYAMLHeader   = "bad_yaml_header"
	KindEmptyReport     = "empty_report"
	KindInvalidUTF8     = "invalid_utf8"
	KindHugeBlob        = "huge_blob"
	KindNotInIndex      = "not_in_index"
	KindNotInContainer  = "not_in_container"
	// KindBadblob is a measurement that does not parse: a badblob in
	// the autoclaved index. It counts toward ndx under the default
	// policy and has no ID under --ndx datums.
	KindBadblob = "badblob"
)

// Corruption kinds: container level (tar containers).
const (
	KindLZ4Truncated   = "lz4_truncated"
	KindLZ4Corrupt     = "lz4_corrupt"
	KindLZ4ContentSize = "lz4_content_size"
	KindTarTruncated   = "tar_truncated"
)

// ReportKinds and ContainerKinds list the corruption kinds.
var (
	ReportKinds    = []string{KindBadTextname, KindTruncatedReport, KindBrokenFrame, KindBadYAMLHeader, KindEmptyReport, KindInvalidUTF8, KindHugeBlob, KindNotInIndex, KindNotInContainer, KindBadblob}
	ContainerKinds = []string{KindLZ4Truncated, KindLZ4Corrupt, KindLZ4ContentSize, KindTarTruncated}
)

// Config says what to generate.
type Config struct {
	Seed    uint64
	Start   time.Time // the first bucket's date
	Buckets int
	Reports int // per bucket
	// JSONFraction is the share of reports in JSON (the rest are YAML).
	JSONFraction float64
	// Measurements per report: Pareto with this minimum and shape, capped.
	MinMeasurements int
	Alpha           float64
	MaxMeasurements int
	// MaxTemplate, when set, keeps only the real samples whose
	// measurement is at most that many bytes (a corpus of small
	// measurements, as most of the real one's are); at least one JSON and
	// one YAML sample must remain.
	MaxTemplate int
	// Varied, in [0, 1], for a canned corpus: each measurement is its
	// sample with this share of its string values redrawn (their letters
	// and digits), so that the containers compress as the archive does,
	// not as one sample repeated. 0: every measurement is its sample.
	Varied  float64
	CanSize int64 // slices of reports stay under this
	// Format is FormatCanned (the default when empty), FormatAutoclaved
	// or FormatBoth.
	Format string
	// TimeSlots, when set, draws the report times from that many seconds
	// of each bucket's 36 hours, evenly spaced from the bucket's midnight
	// back, so that reports share timestamps within a bucket and with the
	// next one: collisions for small counter widths.
	TimeSlots int
	// Corrupt maps a corruption kind to its rate in [0, 1].
	Corrupt map[string]float64
	// HugeBlob is the size of a huge_blob measurement; MaxBlob is the
	// limit over which the ground truth expects oversized_blob.
	HugeBlob int64
	MaxBlob  int64
	// Progress, when set, is called after each bucket with the stats so
	// far (of the canned form, when both are written).
	Progress func(Stats)
}

// DefaultConfig is a small corpus: a few buckets of YAML and JSON reports.
func DefaultConfig() Config {
	return Config{
		Seed: 1, Start: time.Date(2017, 6, 1, 0, 0, 0, 0, time.UTC), Buckets: 3, Reports: 200,
		JSONFraction: 0.6, MinMeasurements: 10, Alpha: 1.2, MaxMeasurements: 1_000_003,
		CanSize: 64 << 20, HugeBlob: 65 << 20, MaxBlob: 64 << 20,
	}
}

// Truth is one row of ground-truth.jsonl: a report (or, with an empty
// textname, a container) and what a run must make of it.
type Truth struct {
	Bucket   string `json:"bucket"`
	File     string `json:"file"`
	Textname string `json:"textname"`
	N        int    `json:"n"` // measurements that get IDs
	// Badblobs is how many of the N do not parse: under --ndx datums
	// they get no ID, and each is a badblob dead letter.
	Badblobs int      `json:"badblobs,omitempty"`
	Reasons  []string `json:"reasons"` // dead-letter reasons expected, sorted
}

// ReadTruth reads the ground truth of the corpus in dir.
func ReadTruth(dir string) ([]Truth, error) {
	f, err := os.Open(filepath.Join(dir, TruthName))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Truth
	dec := json.NewDecoder(bufio.NewReader(f))
	for dec.More() {
		var t Truth
		if err := dec.Decode(&t); err != nil {
			return nil, fmt.Errorf("%s: %w", TruthName, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Stats counts what Generate wrote.
type Stats struct {
	Buckets, Containers, Reports, Measurements int
	Bytes, TextBytes                           int64 // compressed, uncompressed
}

// TruthName is the ground-truth file in the corpus folder.
const TruthName = "ground-truth.jsonl"

// Generate writes the corpus into dir: one folder per bucket and
// ground-truth.jsonl.
func Generate(dir string, cfg Config) (Stats, error) {
	var st Stats
	jsonT, yamlT, err := loadTemplates()
	if err != nil {
		return st, err
	}
	if cfg.MaxTemplate > 0 {
		small := func(ts []template) []template {
			var out []template
			for _, t := range ts {
				if len(t.blob) <= cfg.MaxTemplate {
					out = append(out, t)
				}
			}
			return out
		}
		if jsonT, yamlT = small(jsonT), small(yamlT); len(jsonT) == 0 || len(yamlT) == 0 {
			return st, fmt.Errorf("corpus: no JSON or no YAML sample of at most %d bytes", cfg.MaxTemplate)
		}
	}
	if err := cfg.Check(); err != nil {
		return st, fmt.Errorf("corpus: %w", err)
	}
	var roots []string // canned, autoclaved; "" for a form not written
	switch cfg.Format {
	case "", FormatCanned:
		roots = []string{dir, ""}
	case FormatAutoclaved:
		roots = []string{"", dir}
	case FormatBoth:
		roots = []string{filepath.Join(dir, FormatCanned), filepath.Join(dir, FormatAutoclaved)}
	default:
		return st, fmt.Errorf("corpus: format %q: want %s, %s or %s", cfg.Format, FormatCanned, FormatAutoclaved, FormatBoth)
	}
	var truths [2]*truthFile
	for i, root := range roots {
		if root == "" {
			continue
		}
		if err := os.MkdirAll(root, 0o755); err != nil {
			return st, err
		}
		tf, err := createTruth(root)
		if err != nil {
			return st, err
		}
		defer tf.f.Close()
		truths[i] = tf
	}
	for b := range cfg.Buckets {
		date := cfg.Start.AddDate(0, 0, b).Format("2006-01-02")
		g := &bucketGen{cfg: cfg, date: date, json: jsonT, yaml: yamlT,
			rng: rand.New(rand.NewPCG(cfg.Seed, uint64(b)+1))}
		cans := g.pack(g.plan())
		if roots[0] != "" {
			g.dir = filepath.Join(roots[0], date)
			truth, err := g.run(cans, &st)
			if err != nil {
				return st, err
			}
			if err := truths[0].write(truth); err != nil {
				return st, err
			}
		}
		if roots[1] != "" {
			acSt := &st
			if roots[0] != "" {
				acSt = &Stats{} // the canned form's stats are the ones returned
			}
			truth, err := g.writeAutoclaved(filepath.Join(roots[1], date), cans, acSt)
			if err != nil {
				return st, err
			}
			if err := truths[1].write(truth); err != nil {
				return st, err
			}
		}
		st.Buckets++
		if cfg.Progress != nil {
			cfg.Progress(st)
		}
	}
	for _, tf := range truths {
		if tf != nil {
			if err := tf.close(); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

type truthFile struct {
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
}

func createTruth(root string) (*truthFile, error) {
	f, err := os.Create(filepath.Join(root, TruthName))
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriter(f)
	return &truthFile{f: f, w: w, enc: json.NewEncoder(w)}, nil
}

func (t *truthFile) write(rows []Truth) error {
	for _, r := range rows {
		if err := t.enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

func (t *truthFile) close() error {
	if err := t.w.Flush(); err != nil {
		return err
	}
	return t.f.Close()
}

// ErrFormat is the error of a format that is none of the formats.
var ErrFormat = errors.New("format")

// Check checks the configuration's counts, sizes, format and corruption
// kinds and rates; Generate refuses a configuration it fails.
// The bounds of a Config: a test corpus, not the archive (147 M
// measurements); past them a typing slip would fill the disk.
const (
	MaxBuckets      = 10_000
	MaxReports      = 1_000_000
	MaxMeasurements = 10_000_000
	MaxHugeBlob     = 1 << 30
	MaxCanSize      = 4 << 30
)

func (c Config) Check() error {
	if c.Buckets < 1 || c.Reports < 0 || c.MinMeasurements < 1 || c.Alpha <= 0 || c.MaxMeasurements < 1 ||
		c.JSONFraction < 0 || c.JSONFraction > 1 || c.CanSize < 1 || c.HugeBlob < 16 || c.TimeSlots < 0 {
		return errors.New("a count, size or fraction is out of range")
	}
	switch {
	case c.Buckets > MaxBuckets:
		return fmt.Errorf("%d buckets: at most %d (the real archive has 2,026)", c.Buckets, MaxBuckets)
	case c.Reports > MaxReports:
		return fmt.Errorf("%d reports a bucket: at most %d", c.Reports, MaxReports)
	case c.MaxMeasurements > MaxMeasurements || c.MinMeasurements > MaxMeasurements:
		return fmt.Errorf("%d measurements a report: at most %d", max(c.MinMeasurements, c.MaxMeasurements), MaxMeasurements)
	case c.HugeBlob > MaxHugeBlob || c.MaxBlob > MaxHugeBlob:
		return fmt.Errorf("a blob of %d bytes: at most %d (1 GiB)", max(c.HugeBlob, c.MaxBlob), int64(MaxHugeBlob))
	case c.CanSize > MaxCanSize:
		return fmt.Errorf("cans of %d bytes: at most %d (4 GiB)", c.CanSize, int64(MaxCanSize))
	}
	switch c.Format {
	case "", FormatCanned, FormatAutoclaved, FormatBoth:
	default:
		return fmt.Errorf("%w %q: want canned, autoclaved or both", ErrFormat, c.Format)
	}
	if c.Varied < 0 || c.Varied > 1 {
		return fmt.Errorf("varied share %g: outside [0, 1]", c.Varied)
	}
	if c.Varied > 0 && c.Format != "" && c.Format != FormatCanned {
		return errors.New("a varied corpus is canned only: the autoclaved form holds one normalised line per report")
	}
	for k, r := range c.Corrupt {
		if !IsKind(k) {
			return fmt.Errorf("unknown corruption kind %q; the kinds are all, %s", k, strings.Join(kinds(), ", "))
		}
		if r < 0 || r > 1 {
			return fmt.Errorf("corruption %s=%g: the rate is outside [0, 1]", k, r)
		}
	}
	return nil
}

// AddCorruption adds KIND=RATE to rates; KIND all stands for every kind
// but huge_blob, which is only made when named.
func AddCorruption(rates map[string]float64, s string) error {
	kind, rate, ok := strings.Cut(s, "=")
	r, err := strconv.ParseFloat(rate, 64)
	if !ok || err != nil || r < 0 || r > 1 {
		return fmt.Errorf("want KIND=RATE with RATE in 0..1, got %q", s)
	}
	names := []string{kind}
	if kind == "all" {
		names = slices.DeleteFunc(kinds(), func(k string) bool { return k == KindHugeBlob })
	}
	for _, k := range names {
		rates[k] = r
	}
	return nil
}

// kinds returns the report kinds, then the container kinds.
func kinds() []string { return slices.Concat(ReportKinds, ContainerKinds) }

// IsKind reports whether kind is a corruption kind.
func IsKind(kind string) bool {
	return slices.Contains(kinds(), kind)
}

type bucketGen struct {
	cfg        Config
	date, dir  string
	json, yaml []template
	rng        *rand.Rand
	names      map[string]bool
}

var countries = []string{"US", "DE", "IR", "RU", "BR", "IN", "IT", "GB", "CN", "ZZ"}

// Alnum is the letters and digits of random report IDs.
const Alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func (g *bucketGen) alnum(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = Alnum[g.rng.IntN(len(Alnum))]
	}
	return string(b)
}

// textname makes a unique, valid textname for a report of the template.
func (g *bucketGen) textname(t *template, bad bool) (string, string) {
	day, _ := time.Parse("2006-01-02", g.date)
	for {
		ts := day.Add(-time.Duration(g.rng.IntN(36*3600)) * time.Second)
		if n := g.cfg.TimeSlots; n > 0 {
			ts = day.Add(-time.Duration(g.rng.IntN(n)) * (36 * time.Hour / time.Duration(n)).Truncate(time.Second))
		}
		cc := countries[g.rng.IntN(len(countries))]
		asn := g.rng.IntN(70000)
		if cc == "ZZ" {
			asn = 0
		}
		var rid string
		switch x := g.rng.IntN(10); {
		case x < 5:
			lag := time.Duration(g.rng.IntN(30)) * time.Second
			if g.cfg.TimeSlots > 0 {
				lag = 0 // the report_id time is the OOID's: keep it on the slot
			}
			rid = fmt.Sprintf("%s_AS%d_%s", ts.Add(lag).Format("20060102T150405Z"), asn, g.alnum(50))
		case x < 8 || t.kind == "json":
			rid = g.alnum(64)
		default:
			rid = "no_report_id"
		}
		stamp := ts.Format("20060102T150405Z")
		if bad {
			stamp = ts.Format("2006") + "13" + ts.Format("02T150405Z") // month 13
			rid = "no_report_id"
		}
		ver := "0.2.0"
		if t.kind == "yaml" {
			ver = "0.1.0"
		}
		base := fmt.Sprintf("%s-%s-AS%d-%s-%s-%s-probe.%s", stamp, cc, asn, t.testName, rid, ver, t.kind)
		if !g.names[base] {
			g.names[base] = true
			return g.date + "/" + base, base
		}
	}
}

func (g *bucketGen) hit(kind string) bool {
	r := g.cfg.Corrupt[kind]
	return r > 0 && g.rng.Float64() < r
}

func (g *bucketGen) measurements() int {
	u := 1 - g.rng.Float64() // (0, 1]
	n := float64(g.cfg.MinMeasurements) * math.Pow(u, -1/g.cfg.Alpha)
	if max := float64(g.cfg.MaxMeasurements); g.cfg.MaxMeasurements > 0 && n > max {
		n = max
	}
	return int(n)
}

// plan draws the bucket's reports.
func (g *bucketGen) plan() []*report {
	g.names = map[string]bool{}
	var reps []*report
	for range g.cfg.Reports {
		t := &g.yaml[g.rng.IntN(len(g.yaml))]
		if g.rng.Float64() < g.cfg.JSONFraction {
			t = &g.json[g.rng.IntN(len(g.json))]
		}
		r := &report{tmpl: t, kind: t.kind, testName: t.testName, bucket: g.date, n: g.measurements(),
			seed: g.rng.Uint64(), quirks: t.kind == "yaml" && g.rng.IntN(3) == 0, hugeSize: g.cfg.HugeBlob, varied: g.cfg.Varied}
		for _, k := range ReportKinds {
			if k == KindBadYAMLHeader && r.kind != "yaml" {
				continue
			}
			if g.hit(k) {
				r.corrupt = k
				break
			}
		}
		switch r.corrupt {
		case KindEmptyReport:
			r.n = 0
		case KindTruncatedReport, KindBrokenFrame, KindInvalidUTF8, KindHugeBlob, KindBadblob:
			r.n = max(r.n, 1)
			r.at = g.rng.IntN(r.n)
		}
		r.textname, r.basename = g.textname(t, r.corrupt == KindBadTextname)
		reps = append(reps, r)
	}
	return reps
}

// container is one file of the bucket.
type container struct {
	name    string // "<test_name>.<N>.tar.lz4" or "<basename>.lz4"
	tar     bool
	reports []*report
	corrupt string
	after   int // the member after which a container corruption strikes
}

// pack cuts the reports into containers as canning.py's pack_bucket did.
func (g *bucketGen) pack(reps []*report) []*container {
	byTest := map[string][]*report{}
	var tests []string
	var out []*container
	for _, r := range reps {
		r.measure()
		if r.size >= g.cfg.CanSize {
			out = append(out, &container{name: r.basename + ".lz4", reports: []*report{r}})
			continue
		}
		if byTest[r.testName] == nil {
			tests = append(tests, r.testName)
		}
		byTest[r.testName] = append(byTest[r.testName], r)
	}
	sort.Strings(tests)
	for _, test := range tests {
		rs := byTest[test]
		sort.Slice(rs, func(i, j int) bool { return rs[i].basename < rs[j].basename })
		var slices [][]*report
		var cur []*report
		var size int64
		for _, r := range rs {
			if len(cur) > 0 && size+r.size >= g.cfg.CanSize {
				slices = append(slices, cur)
				cur, size = nil, 0
			}
			cur = append(cur, r)
			size += r.size
		}
		if len(cur) > 0 {
			slices = append(slices, cur)
		}
		digits := len(fmt.Sprint(len(slices) - 1))
		for i, s := range slices {
			if len(s) == 1 {
				out = append(out, &container{name: s[0].basename + ".lz4", reports: s})
				continue
			}
			out = append(out, &container{name: fmt.Sprintf("%s.%0*d.tar.lz4", test, digits, i), tar: true, reports: s})
		}
	}
	for _, c := range out {
		clean := true
		for _, r := range c.reports {
			if !c.tar && (r.corrupt == KindNotInIndex || r.corrupt == KindNotInContainer) {
				r.corrupt = "" // an as-is file has no member list to leave a report out of
			}
			clean = clean && r.corrupt == ""
		}
		if !clean {
			continue
		}
		for _, k := range ContainerKinds {
			if (c.tar || k == KindLZ4ContentSize) && g.hit(k) {
				c.corrupt = k
				c.after = g.rng.IntN(len(c.reports))
				break
			}
		}
	}
	return out
}

// run writes the canned form of the bucket's containers into g.dir.
func (g *bucketGen) run(cans []*container, st *Stats) ([]Truth, error) {
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		return nil, err
	}
	var rows []indexRow
	var truth []Truth
	for _, c := range cans {
		row, t, err := g.write(c)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
		truth = append(truth, t...)
		st.Containers++
		st.Bytes += row.FileSize
		st.TextBytes += row.TextSize
	}
	for _, t := range truth {
		if t.Textname != "" {
			st.Reports++
			st.Measurements += t.N
		}
	}
	sort.Slice(truth, func(i, j int) bool {
		if truth[i].File != truth[j].File {
			return truth[i].File < truth[j].File
		}
		return truth[i].Textname < truth[j].Textname
	})
	return truth, g.writeIndex(rows)
}

// write writes one container and returns its index row and ground truth.
func (g *bucketGen) write(c *container) (indexRow, []Truth, error) {
	fileName := g.date + "/" + c.name
	row := indexRow{Filename: fileName, Tar: c.tar}
	var truth []Truth
	f, err := os.Create(filepath.Join(g.dir, c.name))
	if err != nil {
		return row, nil, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	fw := &countWriter{w: bw}
	zw := lz4.NewWriter(fw)
	if err := zw.Apply(lz4.BlockSizeOption(lz4.Block4Mb), lz4.ChecksumOption(true), lz4.BlockChecksumOption(false), lz4.ConcurrencyOption(1)); err != nil {
		return row, nil, err
	}
	text := &countWriter{w: zw}
	var out io.Writer = text // io.Discard once a tar_truncated cut is made
	damageAt := int64(-1)    // compressed offset of the block an LZ4 corruption strikes
	lost := false            // the members from here on are lost to a container corruption
	for i, r := range c.reports {
		t := Truth{Bucket: g.date, File: fileName, Textname: r.textname, N: r.kept(), Badblobs: r.badblobs()}
		switch {
		case r.corrupt == KindBadblob: // found only when blobs are parsed (--ndx datums)
		case r.corrupt == KindHugeBlob:
			if r.hugeSize-1 > g.cfg.MaxBlob {
				t.Reasons = []string{deadletter.OversizedBlob}
			}
		case r.corrupt != "":
			t.Reasons = []string{r.corrupt}
		}
		sum := newTextSum()
		if r.corrupt == KindNotInContainer {
			// Listed by the index, absent from the tar.
			_ = r.write(sum, nil) // hashes do not fail
			row.Texts = append(row.Texts, sum.text(r))
			if lost {
				t.Reasons = []string{c.corrupt}
			}
			truth = append(truth, t)
			continue
		}
		if lost {
			t.N, t.Reasons = 0, []string{c.corrupt}
		}
		if !c.tar {
			if err := r.write(io.MultiWriter(out, sum), nil); err != nil {
				return row, nil, err
			}
			row.Texts = append(row.Texts, sum.text(r))
			truth = append(truth, t)
			continue
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: r.textname, Size: r.size, Mode: 0o644,
			Uid: 1000, Gid: 1000, Uname: "ooni", Gname: "ooni", ModTime: time.Unix(1_000_000_000+int64(i), 0).UTC(), Format: tar.FormatGNU}
		// A tar.Writer per member: it writes the header (with its
		// LongLink) and never its own end blocks.
		if err := tar.NewWriter(out).WriteHeader(hdr); err != nil {
			return row, nil, err
		}
		content := out
		if c.corrupt == KindTarTruncated && i == c.after {
			// Cut the tar one byte after the middle measurement of this
			// member; the members after it are lost.
			keep, cutAt := (r.kept()+1)/2, int64(0)
			if keep > 0 {
				cutAt = r.endOf(keep-1) + 1
			}
			content = &limitWriter{w: out, n: cutAt}
			t.N, t.Reasons = keep, []string{deadletter.TarTruncated}
			lost = true
		}
		if err := r.write(io.MultiWriter(content, sum), nil); err != nil {
			return row, nil, err
		}
		if content != out {
			out = io.Discard
		}
		if pad := r.size % 512; pad != 0 {
			if _, err := out.Write(make([]byte, 512-pad)); err != nil {
				return row, nil, err
			}
		}
		if (c.corrupt == KindLZ4Truncated || c.corrupt == KindLZ4Corrupt) && i == c.after {
			// End the LZ4 block here: the damage strikes the next one.
			if err := zw.Flush(); err != nil {
				return row, nil, err
			}
			damageAt = fw.n
			lost = true
		}
		if r.corrupt == KindNotInIndex {
			if !lost || i == c.after {
				t.Reasons = []string{deadletter.NotInIndex}
			}
		} else {
			row.Texts = append(row.Texts, sum.text(r))
		}
		truth = append(truth, t)
	}
	if c.tar {
		// GNU tar's end: two zero blocks, padded to a 10240-byte record.
		if _, err := out.Write(make([]byte, 1024+(10240-(text.n+1024)%10240)%10240)); err != nil {
			return row, nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return row, nil, err
	}
	if err := bw.Flush(); err != nil {
		return row, nil, err
	}
	row.TextSize = text.n
	switch c.corrupt {
	case KindLZ4Truncated:
		err = f.Truncate(damageAt + 5)
	case KindLZ4Corrupt:
		var blk [4]byte
		binary.LittleEndian.PutUint32(blk[:], 5<<20) // a block size over the 4 MiB maximum
		_, err = f.WriteAt(blk[:], damageAt)
	case KindLZ4ContentSize:
		err = claimContentSize(f, 4<<30)
	}
	if err != nil {
		return row, nil, err
	}
	if c.corrupt != "" {
		// A failing container stream gives one record for the container.
		// An as-is report meets the frame's error at its very end: it is
		// flagged too, and keeps its measurements.
		if !c.tar {
			last := &truth[len(truth)-1]
			last.Reasons = append(last.Reasons, c.corrupt)
			sort.Strings(last.Reasons)
		}
		truth = append(truth, Truth{Bucket: g.date, File: fileName, Reasons: []string{c.corrupt}})
	}
	for i := range truth {
		if t := &truth[i]; t.Badblobs > 0 {
			for _, r := range c.reports {
				if r.textname == t.Textname && r.at >= t.N {
					t.Badblobs = 0 // the badblob is in the part lost
				}
			}
		}
	}
	if err := fileSums(f, &row); err != nil {
		return row, nil, err
	}
	return row, truth, f.Close()
}

// limitWriter passes on the first n bytes and drops the rest.
type limitWriter struct {
	w io.Writer
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(int64(len(p)), l.n)
		if _, err := l.w.Write(p[:k]); err != nil {
			return 0, err
		}
		l.n -= k
	}
	return len(p), nil
}

// textSum hashes a report as written.
type textSum struct {
	sha  hash.Hash
	crc  uint32
	size int64
}

func newTextSum() *textSum { return &textSum{sha: sha1.New()} }

func (t *textSum) Write(p []byte) (int, error) {
	t.sha.Write(p)
	t.crc = crc32.Update(t.crc, crc32.IEEETable, p)
	t.size += int64(len(p))
	return len(p), nil
}

func (t *textSum) text(r *report) indexText {
	return indexText{Textname: r.textname, Size: t.size, SHA1: b64(t.sha.Sum(nil)), CRC32: int32(t.crc)}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// fileSums fills the row's file fields from the file as it is on disk.
func fileSums(f *os.File, row *indexRow) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	h := sha1.New()
	c := crc32.NewIEEE()
	n, err := io.Copy(io.MultiWriter(h, c), f)
	if err != nil {
		return err
	}
	row.FileSize, row.FileSHA1, row.FileCRC32 = n, b64(h.Sum(nil)), int32(c.Sum32())
	return nil
}

// ClaimContentSize gives the first LZ4 frame of the file path a
// content-size field of size (a frame written without one), as damaged
// archives have: for tests of the field's edge values.
func ClaimContentSize(path string, size uint64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return errors.Join(claimContentSize(f, size), f.Close())
}

// claimContentSize rewrites the frame header of f to claim size bytes of
// content (the Content-Size flag and field, and the header checksum).
func claimContentSize(f *os.File, size uint64) error {
	data, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}
	if len(data) < 7 || binary.LittleEndian.Uint32(data) != lz4frame.Magic || data[4]&0x08 != 0 {
		return fmt.Errorf("corpus: %s: not a frame without content size", f.Name())
	}
	desc := make([]byte, 10)
	desc[0], desc[1] = data[4]|0x08, data[5]
	binary.LittleEndian.PutUint64(desc[2:], size)
	hc := lz4frame.HeaderChecksum(desc)
	out := append(append(append(data[:4:4], desc...), hc), data[7:]...)
	if _, err := f.WriteAt(out, 0); err != nil {
		return err
	}
	return nil
}

// indexRow is one row of a canned index.
type indexRow struct {
	Filename  string
	Tar       bool
	FileSize  int64
	FileSHA1  string
	FileCRC32 int32
	TextSize  int64
	Texts     []indexText
}

type indexText struct {
	Textname string
	Size     int64
	SHA1     string
	CRC32    int32
}

// writeIndex writes index.json.gz as canning.py did: tar rows first, then
// as-is rows, keys sorted, Python's default separators.
func (g *bucketGen) writeIndex(rows []indexRow) error {
	f, err := os.Create(filepath.Join(g.dir, "index.json.gz"))
	if err != nil {
		return err
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	zw.Name = "index.json"
	zw.ModTime = time.Unix(0, 0)
	bw := bufio.NewWriter(zw)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, pass := range []bool{true, false} {
		for _, r := range rows {
			if r.Tar != pass {
				continue
			}
			var sb strings.Builder
			if r.Tar {
				sb.WriteString(`{"canned": [`)
				for i, t := range r.Texts {
					if i > 0 {
						sb.WriteString(", ")
					}
					fmt.Fprintf(&sb, `{"text_crc32": %d, "text_sha1": %s, "text_size": %d, "textname": %s}`, t.CRC32, q(t.SHA1), t.Size, q(t.Textname))
				}
				fmt.Fprintf(&sb, `], "file_crc32": %d, "file_sha1": %s, "file_size": %d, "filename": %s, "text_size": %d}`,
					r.FileCRC32, q(r.FileSHA1), r.FileSize, q(r.Filename), r.TextSize)
			} else {
				t := indexText{}
				if len(r.Texts) == 1 {
					t = r.Texts[0]
				}
				fmt.Fprintf(&sb, `{"file_crc32": %d, "file_sha1": %s, "file_size": %d, "filename": %s, "text_crc32": %d, "text_sha1": %s, "text_size": %d, "textname": %s}`,
					r.FileCRC32, q(r.FileSHA1), r.FileSize, q(r.Filename), t.CRC32, q(t.SHA1), t.Size, q(t.Textname))
			}
			sb.WriteString("\n")
			bw.WriteString(sb.String())
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}
