package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/backfill-dev/backfill/internal/corpus"
	"github.com/backfill-dev/backfill/pipeline/job"
)

// progress shows a bar on a terminal and a line every few seconds
// elsewhere.
type progress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	mu    sync.Mutex
	last  time.Time
	start time.Time
	p     job.Progress
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, start: time.Now(), last: time.Now()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions64(-1, progressbar.OptionSetWriter(w), progressbar.OptionShowBytes(true), progressbar.OptionUseIECUnits(true),
			progressbar.OptionSetDescription("backfill"), progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	return p
}

func (p *progress) update(j job.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.p = j
	if p.bar != nil {
		p.bar.ChangeMax64(max(j.BytesTotal, 1))
		p.bar.Describe(fmt.Sprintf("bucket %d/%d, %d measurements; compressed input read", j.Buckets, j.BucketsTotal, j.Measurements))
		p.bar.Set64(j.BytesIn)
		return
	}
	if time.Since(p.last) >= 5*time.Second {
		p.last = time.Now()
		p.line()
	}
}

func (p *progress) line() {
	j := p.p
	secs := max(time.Since(p.start).Seconds(), 1e-9)
	rate := float64(j.BytesIn) / secs
	eta := "?"
	if rate > 0 {
		eta = (time.Duration(float64(j.BytesTotal-j.BytesIn)/rate) * time.Second).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "backfill: %d/%d buckets, %s of %s compressed input read (%.1f MiB/s), %d measurements (%.0f/s), ETA %s\n",
		j.Buckets, j.BucketsTotal, humanBytes(j.BytesIn), humanBytes(j.BytesTotal), rate/(1<<20), j.Measurements, float64(j.Measurements)/secs, eta)
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
		return
	}
	if time.Since(p.start) >= 5*time.Second {
		p.line()
	}
}

// genProgress shows how far gen is: a line redrawn per bucket on a
// terminal, a line every five seconds elsewhere.
type genProgress struct {
	w           io.Writer
	tty         bool
	total       int
	start, last time.Time
	st          corpus.Stats
}

func newGenProgress(w io.Writer, buckets int) *genProgress {
	p := &genProgress{w: w, total: buckets, start: time.Now(), last: time.Now()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

func (p *genProgress) line() string {
	return fmt.Sprintf("backfill: gen: %d/%d buckets, %d reports, %s written", p.st.Buckets, p.total, p.st.Reports, humanBytes(p.st.Bytes))
}

func (p *genProgress) update(st corpus.Stats) {
	p.st = st
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r%s\x1b[K", p.line())
	case time.Since(p.last) >= 5*time.Second:
		p.last = time.Now()
		fmt.Fprintln(p.w, p.line())
	}
}

func (p *genProgress) finish() {
	if p.tty {
		fmt.Fprint(p.w, "\r\x1b[K")
	} else if time.Since(p.start) >= 5*time.Second {
		fmt.Fprintln(p.w, p.line())
	}
}
