package keysearch

import (
	"fmt"
	"io"
	"math"
	"time"
)

// Report is what keysearch prints: the shape of the corpus, the expected
// search, and what was found.
type Report struct {
	Reports          int64   `json:"reports"`
	Measurements     int64   `json:"measurements"`
	SharedReports    int64   `json:"shared_reports"`
	SharedTimestamps int     `json:"shared_timestamps"`
	Rejects          int64   `json:"rejects"` // inputs lost, left out of the search
	CounterBits      int     `json:"counter_bits"`
	MinCounterBits   int     `json:"min_counter_bits"`
	ExpectedTrials   float64 `json:"expected_trials"`
	NotebookTrials   float64 `json:"expected_trials_notebook"`
	// For a key table: the expected number of timestamps with their own
	// key, and of keys tried to find them.
	ExpectedOverrides   float64 `json:"expected_overrides,omitempty"`
	ExpectedTableTrials float64 `json:"expected_table_trials,omitempty"`
	Seed                string  `json:"seed"`
	Key                 uint64  `json:"key"`
	Overrides           int     `json:"overrides"`
	Trials              uint64  `json:"trials"`
	Seconds             float64 `json:"seconds"`
	SearchSeconds       float64 `json:"search_seconds"` // of Seconds, after the inputs were read
	Scheme              string  `json:"scheme"`
	File                string  `json:"file"`
}

// TrialsText says a count of trials, as a power of two when it is huge.
func TrialsText(e float64) string {
	if math.IsInf(e, 1) || e > 1e15 {
		return fmt.Sprintf("2^%.0f", math.Log2(e))
	}
	return fmt.Sprintf("%.0f", e)
}

// ProgressLines prints a line every five seconds: keys tried, rate, and the
// time left if the search takes the expected number of trials.
func ProgressLines(w io.Writer, expected float64) func(Progress) {
	var last time.Duration
	return func(p Progress) {
		if p.Elapsed-last < 5*time.Second {
			return
		}
		last = p.Elapsed
		rate := float64(p.Trials) / max(p.Elapsed.Seconds(), 1e-9)
		eta := "?"
		if left := expected - float64(p.Trials); rate > 0 && left > 0 && !math.IsInf(left, 1) {
			eta = "about " + time.Duration(left/rate*float64(time.Second)).Round(time.Second).String()
		} else if left <= 0 {
			eta = "past the expected count"
		}
		fmt.Fprintf(w, "backfill keysearch: %d keys tried (%.0f/s), %s expected: %s left\n", p.Trials, rate, TrialsText(expected), eta)
	}
}

// WriteText writes the result as keysearch prints it.
func (r Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "reports           %d (%d measurements)\n", r.Reports, r.Measurements)
	if r.Rejects > 0 {
		fmt.Fprintf(w, "rejects           %d (inputs lost, listed on stderr: no key is searched for them)\n", r.Rejects)
	}
	fmt.Fprintf(w, "shared            %d reports on %d timestamps\n", r.SharedReports, r.SharedTimestamps)
	fmt.Fprintf(w, "counter bits      %d (the smallest that can work, of the widths a scheme takes: %d)\n", r.CounterBits, r.MinCounterBits)
	fmt.Fprintf(w, "expected trials   %s for one key (the notebook's line model: %s)\n", TrialsText(r.ExpectedTrials), TrialsText(r.NotebookTrials))
	if r.Overrides > 0 {
		fmt.Fprintf(w, "key table         default key %d of seed %s, %d timestamps with their own key (%.1f expected)\n", r.Key, r.Seed, r.Overrides, r.ExpectedOverrides)
	} else {
		fmt.Fprintf(w, "key               %d of seed %s\n", r.Key, r.Seed)
	}
	fmt.Fprintf(w, "trials            %d in %.1fs (%.1fs reading the inputs)\n", r.Trials, r.Seconds, r.Seconds-r.SearchSeconds)
	fmt.Fprintf(w, "scheme            %s\n", r.Scheme)
	fmt.Fprintf(w, "written           %s\n", r.File)
}
