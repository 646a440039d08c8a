package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/backfill-dev/backfill/internal/units"
)

// Done is how far a run is.
type Done struct {
	Buckets, BucketsTotal int
	BytesIn, BytesTotal   int64 // compressed input read, and all of it
	Measurements          int64
}

// Progress shows a run's progress: a bar on a terminal, a line every five
// seconds elsewhere.
type Progress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	mu    sync.Mutex
	last  time.Time
	start time.Time
	d     Done
}

// NewProgress shows progress on w.
func NewProgress(w io.Writer) *Progress {
	p := &Progress{w: w, start: time.Now(), last: time.Now()}
	if isTerminal(w) {
		p.bar = progressbar.NewOptions64(-1, progressbar.OptionSetWriter(w), progressbar.OptionShowBytes(true), progressbar.OptionUseIECUnits(true),
			progressbar.OptionSetDescription("backfill"), progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Update shows d; it may be called from any goroutine.
func (p *Progress) Update(d Done) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.d = d
	if p.bar != nil {
		p.bar.ChangeMax64(max(d.BytesTotal, 1))
		p.bar.Describe(fmt.Sprintf("bucket %d/%d, %d measurements; compressed input read", d.Buckets, d.BucketsTotal, d.Measurements))
		_ = p.bar.Set64(d.BytesIn) // a bar that cannot be drawn is no reason to stop
		return
	}
	if time.Since(p.last) >= 5*time.Second {
		p.last = time.Now()
		p.line()
	}
}

func (p *Progress) line() {
	d := p.d
	secs := max(time.Since(p.start).Seconds(), 1e-9)
	rate := float64(d.BytesIn) / secs
	eta := "?"
	if rate > 0 {
		eta = (time.Duration(float64(d.BytesTotal-d.BytesIn)/rate) * time.Second).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "backfill: %d/%d buckets, %s of %s compressed input read (%.1f MiB/s), %d measurements (%.0f/s), ETA %s\n",
		d.Buckets, d.BucketsTotal, units.Bytes(d.BytesIn), units.Bytes(d.BytesTotal), rate/(1<<20), d.Measurements, float64(d.Measurements)/secs, eta)
}

// Finish ends the bar, or prints a last line for a run that lasted.
func (p *Progress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Finish()
		return
	}
	if time.Since(p.start) >= 5*time.Second {
		p.line()
	}
}

// Lines shows the progress of a step as one line: redrawn on a terminal,
// printed every five seconds elsewhere.
type Lines struct {
	w           io.Writer
	tty         bool
	start, last time.Time
	text        string
}

// NewLines shows lines on w.
func NewLines(w io.Writer) *Lines {
	return &Lines{w: w, tty: isTerminal(w), start: time.Now(), last: time.Now()}
}

// Update shows text as the line.
func (p *Lines) Update(text string) {
	p.text = text
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r%s\x1b[K", text)
	case time.Since(p.last) >= 5*time.Second:
		p.last = time.Now()
		fmt.Fprintln(p.w, text)
	}
}

// Finish clears the line on a terminal, or prints the last one for a
// step that lasted.
func (p *Lines) Finish() {
	if p.tty {
		fmt.Fprint(p.w, "\r\x1b[K")
	} else if time.Since(p.start) >= 5*time.Second {
		fmt.Fprintln(p.w, p.text)
	}
}
