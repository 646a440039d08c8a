package job

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/backfill-dev/backfill/internal/units"
)

// WriteText writes the summary as run prints it: counts, rejects and
// notices by reason, bytes read, time and throughput.
func (s Summary) WriteText(w io.Writer) error {
	secs := max(s.Elapsed.Seconds(), 1e-9)
	fmt.Fprintf(w, "buckets        %d committed, %d skipped\n", s.Buckets, s.Skipped)
	fmt.Fprintf(w, "reports        %d (that have IDs; a report lost with its file is a reject)\n", s.Reports)
	fmt.Fprintf(w, "measurements   %d (that have IDs)\n", s.Measurements)
	if err := s.Tally.WriteText(w); err != nil {
		return err
	}
	if len(s.Strays) > 0 {
		fmt.Fprintf(w, "stray files    %d (in the output's folders, held by no committed bucket)\n", len(s.Strays))
	}
	if s.FromIndex && s.BytesIn == 0 {
		fmt.Fprintf(w, "read           the autoclaved indexes only (--from-index): no container\n")
		fmt.Fprintf(w, "elapsed        %.2fs\n", s.Elapsed.Seconds())
		_, err := fmt.Fprintf(w, "throughput     %.0f measurements/s\n", float64(s.Written)/secs)
		return err
	}
	fmt.Fprintf(w, "read           %s compressed, %s decompressed\n", units.Bytes(s.BytesIn), units.Bytes(s.BytesOut))
	fmt.Fprintf(w, "elapsed        %.2fs\n", s.Elapsed.Seconds())
	_, err := fmt.Fprintf(w, "throughput     %.1f MiB/s decompressed, %.0f measurements/s\n", float64(s.BytesOut)/secs/(1<<20), float64(s.Written)/secs)
	return err
}

// WriteJSON writes the summary as one JSON line, with its rates.
func (s Summary) WriteJSON(w io.Writer) error {
	secs := max(s.Elapsed.Seconds(), 1e-9)
	out := struct {
		Summary
		ElapsedSeconds  float64 `json:"elapsed_seconds"`
		MiBPerSecond    float64 `json:"decompressed_mib_per_second"`
		MeasurementsPer float64 `json:"measurements_per_second"`
	}{s, s.Elapsed.Seconds(), float64(s.BytesOut) / secs / (1 << 20), float64(s.Written) / secs}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
