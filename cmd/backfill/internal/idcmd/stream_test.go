package idcmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/lines"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/ooidlines"
)

// lineGen is an io.Reader of n "TEXTNAME<TAB>NDX" lines, generated on the
// fly: reports of perReport measurements, each with its own textname.
type lineGen struct {
	n, perReport, i int
	buf             []byte
	off             int // read position in buf
}

func (g *lineGen) Read(p []byte) (int, error) {
	for g.off == len(g.buf) {
		if g.i == g.n {
			return 0, io.EOF
		}
		// No fmt here: boxing its arguments would allocate per line.
		rep, ndx := g.i/g.perReport, g.i%g.perReport
		b := append(g.buf[:0], "2016-07-07/20160706T"...)
		h, m, s := rep/3600%24, rep/60%60, rep%60
		b = append(b, byte('0'+h/10), byte('0'+h%10), byte('0'+m/10), byte('0'+m%10), byte('0'+s/10), byte('0'+s%10))
		b = append(b, "Z-CH-AS"...)
		b = strconv.AppendInt(b, int64(100+rep), 10)
		b = append(b, "-web_connectivity-no_report_id-0.2.0-probe.json\t"...)
		b = strconv.AppendInt(b, int64(ndx), 10)
		g.buf, g.off = append(b, '\n'), 0
		g.i++
	}
	n := copy(p, g.buf[g.off:])
	g.off += n
	return n, nil
}

// TestOOIDStream_Output checks every output line of a generated stream
// against the library.
func TestOOIDStream_Output(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := ooidStream(context.Background(), ooid.DefaultScheme, cli.Stdio{In: &lineGen{n: 20000, perReport: 37}, Out: &out, Err: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&out)
	lines := 0
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		r, err := ooid.DefaultScheme.Report(f[1])
		if err != nil {
			t.Fatal(err)
		}
		ndx, _ := strconv.Atoi(f[2])
		if want := r.ID(uint32(ndx)).String(); f[0] != want || ndx != lines%37 {
			t.Fatalf("line %d: %q, want OOID %s and ndx %d", lines+1, sc.Text(), want, lines%37)
		}
		lines++
	}
	if lines != 20000 {
		t.Errorf("%d lines out, want 20000", lines)
	}
}

// TestOOIDStream_ConstantMemory: memory allocated by "backfill ooid -" does
// not grow with the number of lines.
func TestOOIDStream_ConstantMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 1.1 M lines")
	}
	alloc := func(n int) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := ooidStream(context.Background(), ooid.DefaultScheme, cli.Stdio{In: &lineGen{n: n, perReport: 40}, Out: io.Discard, Err: io.Discard})
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := alloc(100_000), alloc(1_000_000)
	t.Logf("allocated %d bytes for 100k lines, %d bytes for 1M lines", small, large)
	// The generator allocates nothing per line either; allow slack for
	// runtime noise only.
	if large > small+64<<10 {
		t.Errorf("1M lines allocated %d bytes, 100k lines %d: memory grows with input", large, small)
	}
}

// BenchmarkOOIDStream measures "backfill ooid -" in process, lines/s, for
// reports of 1 line (a textname parse and SHA-1 per line) and of 40 lines.
//
//	go test -run '^$' -bench OOIDStream -benchmem ./cmd/backfill/
func BenchmarkOOIDStream(b *testing.B) {
	for _, per := range []int{1, 40} {
		b.Run(fmt.Sprintf("lines_per_report=%d", per), func(b *testing.B) {
			const n = 1_000_000
			b.ReportAllocs()
			for b.Loop() {
				err := ooidStream(context.Background(), ooid.DefaultScheme, cli.Stdio{In: &lineGen{n: n, perReport: per}, Out: io.Discard, Err: io.Discard})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

// TestOOIDStream_LongLines: lines longer than lines.MaxLine, and longer than a
// whole chunk, are rejected with their numbers; the lines around them, and a
// last line without "\n", come out right and in order.
func TestOOIDStream_LongLines(t *testing.T) {
	t.Parallel()
	const name = "2012-12-05/20121205T071421Z-MM-AS18399-http_invalid_request_line-no_report_id-0.1.0-probe.yaml"
	var in strings.Builder
	for i := range 5000 {
		switch i {
		case 10:
			in.WriteString(strings.Repeat("y", lines.MaxLine+1) + "\n")
		case 2000:
			in.WriteString(strings.Repeat("z", 3*ooidlines.ChunkSize+5) + "\n")
		case 2001:
			in.WriteString(strings.Repeat("z", ooidlines.ChunkSize) + "\n")
		default:
			fmt.Fprintf(&in, "%s\t%d\r\n", name, i)
		}
	}
	in.WriteString(name) // no final newline: ndx 0
	var out, errs bytes.Buffer
	err := ooidStream(context.Background(), ooid.DefaultScheme, cli.Stdio{In: strings.NewReader(in.String()), Out: &out, Err: &errs})
	var rejects *cli.RejectsError
	if !errors.As(err, &rejects) || rejects.N != 3 {
		t.Fatalf("err = %v, want 3 rejected lines", err)
	}
	for _, want := range []string{"line 11: longer than", "line 2001: longer than", "line 2002: longer than"} {
		if !strings.Contains(errs.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs.String())
		}
	}
	r, _ := ooid.DefaultScheme.Report(name)
	var want strings.Builder
	for i := range 5000 {
		if i != 10 && i != 2000 && i != 2001 {
			fmt.Fprintf(&want, "%s\t%s\t%d\n", r.ID(uint32(i)), name, i)
		}
	}
	fmt.Fprintf(&want, "%s\t%s\t0\n", r.ID(0), name)
	if out.String() != want.String() {
		t.Errorf("output differs from the expected %d bytes (got %d)", want.Len(), out.Len())
	}
}
