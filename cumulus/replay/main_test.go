package replay

import (
	"fmt"
	"os"
	"testing"

	"github.com/backfill-dev/backfill/internal/cumulustest"
)

// TestMain drops the database Cumulus's migrations made once for the
// tests' copies.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := cumulustest.DropTemplate(); err != nil {
		fmt.Fprintln(os.Stderr, "dropping the migrated template:", err)
		code = 1
	}
	os.Exit(code)
}
