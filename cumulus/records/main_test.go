package records

import (
	"testing"

	"github.com/backfill-dev/backfill/internal/cumulustest"
)

// TestMain stops the oracle's Node process and drops the database
// Cumulus's migrations made once for the tests' copies.
func TestMain(m *testing.M) { cumulustest.Main(m, theOracle.stop) }
