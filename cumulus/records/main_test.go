package records

import (
	"fmt"
	"os"
	"testing"

	"github.com/backfill-dev/backfill/internal/cumulustest"
)

// TestMain stops the oracle's Node process and drops the database
// Cumulus's migrations made once for the tests' copies.
func TestMain(m *testing.M) {
	code := m.Run()
	theOracle.stop()
	if err := cumulustest.DropTemplate(); err != nil {
		fmt.Fprintln(os.Stderr, "dropping the migrated template:", err)
		code = 1
	}
	os.Exit(code)
}
