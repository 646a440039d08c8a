package stamped

import (
	"fmt"
	"io"
	"maps"
	"slices"
)

// WriteText writes the rejects and notices of t, each by reason, as the
// summaries print them.
func (t Tally) WriteText(w io.Writer) error {
	byReason := func(m map[string]int64) {
		for _, r := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(w, "  %-20s %d\n", r, m[r])
		}
	}
	fmt.Fprintf(w, "rejects        %d (inputs lost, or reports and measurements left without IDs)\n", t.Rejects)
	byReason(t.RejectsByReason)
	lost := "nothing lost"
	if t.Rejects > 0 {
		lost = "these lost nothing"
	}
	_, err := fmt.Fprintf(w, "notices        %d (recorded; %s)\n", t.Notices, lost)
	byReason(t.NoticesByReason)
	return err
}
