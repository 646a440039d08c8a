package cumulusdb

import (
	"testing"

	"github.com/backfill-dev/backfill/internal/cumulustest"
)

// TestMain drops the database Cumulus's migrations made once for the
// tests' copies.
func TestMain(m *testing.M) { cumulustest.Main(m) }
