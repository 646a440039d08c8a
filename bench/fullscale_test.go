package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	be "encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/klauspost/compress/gzip"

	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/audit"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

var (
	fullScale        = flag.Bool("bench.fullscale", false, "run BenchmarkFullScale: the whole corpus as indexes (5.1 GiB, about 35 GB of disk at its peak, 25 minutes)")
	fullScaleParquet = flag.Bool("bench.fullscale.parquet", false, "BenchmarkFullScale stops after its Parquet steps: the floor, the Parquet runs under the default and a keyed scheme and their verify (about 8 minutes)")
)

// BenchmarkFullScale runs the whole corpus of docs/full-scale.md, 147 M
// measurements in 3.6 M reports as autoclaved indexes, through every path
// of the one-off migration, one after the other in one run, and prints
// them side by side: the floor of the from-index path (every index read
// and scanned, no output), the Parquet run (1,000,000 of its rows drawn
// at random and held to backfill ooid, its collision verdicts to audit's)
// and its verify (complete against the indexes), the Parquet run under a
// 24-bit keyed scheme from keysearch (its verdicts held to audit's under
// that scheme) and its verify, the --bulk load, the server's own COPY … FROM of
// the same rows, sorted by ooid, into the same tables with the same
// indexes (the baseline), and the per-bucket load and its verify. Each
// PostgreSQL step loads into a database of its own, dropped (and the
// server checkpointed) before the next starts. The targets are those of
// docs/full-scale.md: per bucket ≥ 0.9× the baseline's rows/s, --bulk ≥
// 1.0×, Parquet ≤ 1.5× the floor's wall time, every peak RSS ≤ 512 MiB.
//
//	make bench-fullscale
func BenchmarkFullScale(b *testing.B) {
	if !*fullScale {
		b.Skip("the full-scale benchmark takes 25 minutes and 35 GB: make bench-fullscale (-bench.fullscale)")
	}
	ix := fullScaleIndexes(b)
	bin := binary(b)
	admin := pgtest.AdminURL(b)
	ctx := context.Background()
	tmp := b.TempDir()
	var steps []step
	add := func(s step) {
		steps = append(steps, s)
		b.Logf("%-34s %s", s.name, s.say())
	}
	rows := fullScaleRows(b, ix)

	floor := measure(func() step {
		start, cpu := time.Now(), selfCPU()
		files, _ := filepath.Glob(filepath.Join(ix, "*", "index.json.gz"))
		if _, err := parallel(2, files, scanIndex); err != nil {
			b.Fatal(err)
		}
		return step{wall: time.Since(start), tool: selfCPU() - cpu}
	})
	floor.name = "floor: every index read and scanned"
	add(floor)

	out := filepath.Join(tmp, "parquet")
	pq := toolStep(b, "Parquet", bin, "run", "--in", ix, "--from-index", "-q", "--out", out)
	pq.ratio, pq.of = pq.wall.Seconds()/floor.wall.Seconds(), "the floor's wall time"
	add(pq)
	sampleAgainstOOID(b, bin, out, rows, 1_000_000)
	pqProof := toolStep(b, "verify of the Parquet output", bin, "verify", "-q", "--in", ix, "--from-index", out)
	add(pqProof)
	manifest := filepath.Join(ix, "manifest.tsv")
	sameVerdicts(b, bin, manifest, out)
	os.RemoveAll(out)

	// A 24-bit keyed scheme from keysearch: the run under it has audit's
	// verdicts, and verify proves it with the scheme file.
	scheme := filepath.Join(tmp, "scheme24.txt")
	if o, err := exec.Command(bin, "keysearch", "-q", "--counter-bits", "24", "--out", scheme, manifest).CombinedOutput(); err != nil {
		b.Fatalf("keysearch: %v\n%s", err, o)
	}
	keyed := filepath.Join(tmp, "keyed")
	add(toolStep(b, "Parquet, 24-bit keyed scheme", bin, "run", "--in", ix, "--from-index", "-q", "--scheme", scheme, "--out", keyed))
	sameVerdicts(b, bin, manifest, keyed, "--scheme", scheme)
	add(toolStep(b, "verify of the keyed output", bin, "verify", "-q", "--in", ix, "--from-index", "--scheme", scheme, keyed))
	os.RemoveAll(keyed)
	b.ReportMetric(pq.ratio, "parquet_over_floor")
	if *fullScaleParquet {
		logSteps(b, rows, steps)
		return
	}

	bulkDB, dropBulk := freshDatabase(b, admin)
	bulk := toolStep(b, "--bulk", bin, "run", "--in", ix, "--from-index", "-q", "--sink", "postgres", "--create-schema", "--bulk", "--dsn", bulkDB)
	reports, ids := exportBaseline(b, ctx, bulkDB, tmp, rows)
	dropBulk()

	baseDB, dropBase := freshDatabase(b, admin)
	if o, err := exec.Command(bin, "schema", "--dsn", baseDB).CombinedOutput(); err != nil {
		b.Fatalf("schema: %v\n%s", err, o)
	}
	base := measure(func() step {
		c := pgtest.Connect(b, baseDB)
		start := time.Now()
		copyFile(b, ctx, c, reports, `COPY backfill.reports FROM STDIN (FORMAT binary)`)
		copyFile(b, ctx, c, ids, `COPY backfill.measurements FROM STDIN (FORMAT binary)`)
		return step{wall: time.Since(start)}
	})
	base.name = "baseline: the server's COPY … FROM"
	base.ratio, base.of = 1, "the baseline's rows/s"
	add(base)
	dropBase()
	os.Remove(reports)
	os.Remove(ids)

	bulk.ratio, bulk.of = base.wall.Seconds()/bulk.wall.Seconds(), "the baseline's rows/s"
	add(bulk)
	pbDB, dropPB := freshDatabase(b, admin)
	pb := toolStep(b, "per bucket", bin, "run", "--in", ix, "--from-index", "-q", "--sink", "postgres", "--create-schema", "--dsn", pbDB)
	pb.ratio, pb.of = base.wall.Seconds()/pb.wall.Seconds(), "the baseline's rows/s"
	add(pb)
	pgProof := toolStep(b, "verify of the per-bucket schema", bin, "verify", "-q", "--in", ix, "--from-index", "--sink", "postgres", "--dsn", pbDB)
	add(pgProof)
	dropPB()
	// The two outputs hold one ID set.
	if p, q := digest(b, pqProof.out), digest(b, pgProof.out); p != q {
		b.Errorf("the Parquet output's digest is %s, the schema's %s", p, q)
	} else {
		b.Logf("both outputs' digest: %s", p)
	}

	logSteps(b, rows, steps)
	b.ReportMetric(bulk.ratio, "bulk_x")
	b.ReportMetric(pb.ratio, "per_bucket_x")
}

// logSteps prints the steps side by side.
func logSteps(b *testing.B, rows int64, steps []step) {
	var table strings.Builder
	fmt.Fprintf(&table, "\n%d measurements\n%-34s %9s %11s %9s %9s %10s  %s\n", rows, "step", "wall", "rows/s", "tool CPU", "other CPU", "peak RSS", "ratio")
	for _, s := range steps {
		rss := "–" // in process
		if s.rss > 0 {
			rss = fmt.Sprintf("%d MiB", s.rss>>20)
		}
		fmt.Fprintf(&table, "%-34s %8.1fs %11.0f %8.1fs %8.1fs %10s", s.name, s.wall.Seconds(), float64(rows)/s.wall.Seconds(), s.tool.Seconds(), s.other.Seconds(), rss)
		if s.of != "" {
			fmt.Fprintf(&table, " %7.2f× %s", s.ratio, s.of)
		}
		fmt.Fprintf(&table, "  (load %s)\n", s.load)
	}
	b.Log(table.String())
}

// step is one timed step: its wall time, the CPU of the tool's process
// and the rest of the machine's busy time (the server's, mostly), the
// tool's peak RSS, and the load average when it started.
type step struct {
	name       string
	wall, tool time.Duration
	other      time.Duration
	rss        int64
	load       string
	ratio      float64
	of         string
	out        []byte // what the tool printed
}

func (s step) say() string {
	return fmt.Sprintf("%.1fs wall, %.1fs tool CPU, %.1fs other CPU, %d MiB", s.wall.Seconds(), s.tool.Seconds(), s.other.Seconds(), s.rss>>20)
}

// measure runs fn and adds the machine's busy time less fn's tool CPU,
// and the load average at the start.
func measure(fn func() step) step {
	load, _ := os.ReadFile("/proc/loadavg")
	busy := machineBusy()
	s := fn()
	s.other = max(machineBusy()-busy-s.tool, 0)
	s.load = strings.Join(strings.Fields(string(load))[:3], " ")
	return s
}

// toolStep runs the binary under /usr/bin/time.
func toolStep(b *testing.B, name, bin string, args ...string) step {
	b.Helper()
	s := measure(func() step {
		res := filepath.Join(b.TempDir(), "time")
		cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%e %U %S %M", "-o", res, bin}, args...)...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("%s: %v\n%s", name, err, out)
		}
		raw, err := os.ReadFile(res)
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(string(raw))
		if len(f) < 4 {
			b.Fatalf("/usr/bin/time wrote %q", raw)
		}
		sec := func(s string) time.Duration {
			v, _ := strconv.ParseFloat(s, 64)
			return time.Duration(v * float64(time.Second))
		}
		kb, _ := strconv.ParseInt(f[3], 10, 64)
		return step{wall: sec(f[0]), tool: sec(f[1]) + sec(f[2]), rss: kb << 10, out: out}
	})
	s.name = name
	return s
}

// sampleAgainstOOID draws n rows of the Parquet output at random and
// checks that each ID is the one backfill ooid gives its textname and ndx.
func sampleAgainstOOID(b *testing.B, bin, out string, rows int64, n int) {
	rng := rand.New(rand.NewPCG(7, 8))
	pos := make([]int64, n)
	for i := range pos {
		pos[i] = rng.Int64N(rows)
	}
	slices.Sort(pos)
	files, _ := filepath.Glob(filepath.Join(out, "measurements", "*.parquet"))
	slices.Sort(files)
	var in bytes.Buffer
	var want []string
	var at int64
	for _, f := range files {
		err := parquetfile.EachMeasurement(context.Background(), store.Local(out), "measurements/"+filepath.Base(f), func(_ int64, m parquetfile.Measurement) error {
			for len(want) < n && pos[len(want)] == at {
				fmt.Fprintf(&in, "%s\t%d\n", m.Textname, m.Ndx)
				want = append(want, fmt.Sprintf("%016x\t%s\t%d", uint64(m.OOID), m.Textname, m.Ndx))
			}
			at++
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if at != rows || len(want) != n {
		b.Fatalf("the Parquet output holds %d rows, %d are due; %d of %d drawn", at, rows, len(want), n)
	}
	cmd := exec.Command(bin, "ooid", "-")
	cmd.Stdin = &in
	got, err := cmd.Output()
	if err != nil {
		b.Fatalf("ooid: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if len(lines) != n {
		b.Fatalf("ooid gave %d lines for %d", len(lines), n)
	}
	for i := range lines {
		if lines[i] != want[i] {
			b.Fatalf("the run wrote %s, backfill ooid says %s", want[i], lines[i])
		}
	}
	b.Logf("%d rows drawn at random: every ID is backfill ooid's", n)
}

// sameVerdicts holds the collision verdicts of a Parquet output (its dead
// letters of reason collision) to those of audit over the manifest under
// the same scheme: of each colliding pair, the report whose textname sorts
// last gives up its IDs.
func sameVerdicts(b *testing.B, bin, manifest, out string, scheme ...string) {
	b.Helper()
	js, err := exec.Command(bin, append(append([]string{"audit", "--json", "--pairs", "1000"}, scheme...), manifest)...).Output()
	var aud audit.Report
	if err != nil || json.Unmarshal(js, &aud) != nil || len(aud.Results) != 1 {
		b.Fatalf("audit %v: %v\n%s", scheme, err, js)
	}
	res := aud.Results[0]
	if res.Pairs > int64(len(res.First)) {
		b.Fatalf("audit %v: %d colliding pairs, more than it lists", scheme, res.Pairs)
	}
	var losers []string
	for _, p := range res.First {
		losers = append(losers, max(p.A, p.B))
	}
	var got []string
	files, _ := filepath.Glob(filepath.Join(out, "dead-letters", "*.jsonl"))
	for _, f := range files {
		records, err := parquetfile.ReadDeadLetters(context.Background(), store.Local(out), "dead-letters/"+filepath.Base(f))
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range records {
			if d.Reason == deadletter.Collision {
				got = append(got, d.Textname)
			}
		}
	}
	slices.Sort(got)
	slices.Sort(losers)
	if losers = slices.Compact(losers); !slices.Equal(got, losers) {
		b.Fatalf("the run %v gives %d reports up as collision losers, audit's %d pairs make %d losers", scheme, len(got), res.Pairs, len(losers))
	}
	b.Logf("collision verdicts %v: %d losers, as audit's %d colliding pairs make them", scheme, len(got), res.Pairs)
}

// digest is the output's digest that verify printed.
func digest(b *testing.B, out []byte) string {
	for line := range strings.Lines(string(out)) {
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "digest"); ok {
			return strings.TrimSpace(d)
		}
	}
	b.Fatalf("verify printed no digest:\n%s", out)
	return ""
}

// selfCPU is the CPU time of this process.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineBusy is the CPU time the machine has spent not idle, from
// /proc/stat.
func machineBusy() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	var busy int64
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}

// fullScaleIndexes generates (once, cached) the full-scale corpus as
// autoclaved indexes.
func fullScaleIndexes(b *testing.B) string {
	b.Helper()
	dir := filepath.Join(*benchDir, "ooni2018-indexes")
	if _, err := os.Stat(filepath.Join(dir, "manifest.tsv")); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	out, err := exec.Command(binary(b), "gen", "--profile", "ooni2018", "--format", "autoclaved", "--index-only", "-q", "--out", dir).CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		b.Fatalf("gen: %v\n%s", err, out)
	}
	return dir
}

// fullScaleRows is the measurements of the corpus's manifest.
func fullScaleRows(b *testing.B, ix string) int64 {
	f, err := os.Open(filepath.Join(ix, "manifest.tsv"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		_, n, _ := strings.Cut(sc.Text(), "\t")
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			b.Fatalf("manifest: %q", sc.Text())
		}
		total += v
	}
	return total
}

// scanIndex reads an index whole and counts its rows: the least reading
// an index takes.
func scanIndex(path string, buf []byte) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	z, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return 0, err
	}
	var lines int64
	for {
		n, err := z.Read(buf)
		lines += int64(bytes.Count(buf[:n], []byte{'\n'}))
		if err == io.EOF {
			return lines, nil
		} else if err != nil {
			return lines, err
		}
	}
}

// freshDatabase creates a database and returns a function that drops it
// and checkpoints, so the next step starts clean.
func freshDatabase(b *testing.B, admin string) (string, func()) {
	dsn := pgtest.CreateDatabase(b, admin)
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	return dsn, func() {
		pgtest.Exec(b, admin, "DROP DATABASE "+pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()+" WITH (FORCE)", "CHECKPOINT")
	}
}

// exportBaseline writes the reports of the schema of dsn, and its
// measurements sorted by ooid (the primary key's order: the server's best
// case), as files of COPY's binary format.
func exportBaseline(b *testing.B, ctx context.Context, dsn, dir string, rows int64) (reports, ids string) {
	c := pgtest.Connect(b, dsn)
	reports = filepath.Join(dir, "reports.copy")
	copyToFile(b, ctx, c, reports, `COPY backfill.reports TO STDOUT (FORMAT binary)`)
	// The measurements' rows are fixed-size: the field count, then each
	// of bucket, report, ndx and ooid with its length.
	const header, row = 19, 2 + 8 + 8 + 8 + 12
	var raw bytes.Buffer
	raw.Grow(int(rows)*row + header + 2)
	if _, err := c.PgConn().CopyTo(ctx, &raw, `COPY backfill.measurements (ooid, bucket, report, ndx) TO STDOUT (FORMAT binary)`); err != nil {
		b.Fatal(err)
	}
	all := raw.Bytes()
	body := all[header : len(all)-2]
	if int64(len(body)) != rows*row {
		b.Fatalf("the measurements table holds %d bytes of rows, %d rows are due", len(body), rows)
	}
	type key struct {
		ooid int64
		at   int
	}
	keys := make([]key, rows)
	for i := range keys {
		keys[i] = key{int64(be.BigEndian.Uint64(body[i*row+6:])), i * row}
	}
	slices.SortFunc(keys, func(x, y key) int { return cmp.Compare(x.ooid, y.ooid) })
	ids = filepath.Join(dir, "measurements.copy")
	f, err := os.Create(ids)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.Write(all[:header])
	for _, k := range keys {
		w.Write(body[k.at : k.at+row])
	}
	w.Write([]byte{0xff, 0xff})
	if err := firstError(w.Flush(), f.Close()); err != nil {
		b.Fatal(err)
	}
	return reports, ids
}

// copyFile sends a file to the server's COPY … FROM STDIN.
func copyFile(b *testing.B, ctx context.Context, c *pgx.Conn, path, sql string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := c.PgConn().CopyFrom(ctx, bufio.NewReaderSize(f, 1<<20), sql); err != nil {
		b.Fatalf("%s: %v", sql, err)
	}
}

// copyToFile writes what the COPY … TO STDOUT of sql gives to path.
func copyToFile(b *testing.B, ctx context.Context, c *pgx.Conn, path, sql string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err := c.PgConn().CopyTo(ctx, w, sql); err != nil {
		b.Fatalf("%s: %v", sql, err)
	}
	if err := firstError(w.Flush(), f.Close()); err != nil {
		b.Fatal(err)
	}
}

// firstError is the first of errs that is not nil.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
