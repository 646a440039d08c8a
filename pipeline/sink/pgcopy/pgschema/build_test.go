package pgschema_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy/pgschema"
)

// settings reads the session's settings of the builds.
func settings(t *testing.T, c *pgx.Conn) (mem int64, workers int) {
	t.Helper()
	err := c.QueryRow(context.Background(), `SELECT (SELECT setting::bigint * 1024 FROM pg_settings WHERE name = 'maintenance_work_mem'),
		current_setting('max_parallel_maintenance_workers')::int`).Scan(&mem, &workers)
	if err != nil {
		t.Fatal(err)
	}
	return mem, workers
}

// BuildConstraints builds every index in the session settings its Build
// gives, AutoMemory sized to the measurements table, and leaves the
// session's settings as they were.
func TestBuildConstraints_Settings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.Connect(t, pgtest.NewDatabase(t))
	// The session's own settings are the ones the builds start from,
	// and the ones they leave: a small memory, as AutoMemory sizes it up.
	if _, err := c.Exec(ctx, `SET maintenance_work_mem = '2MB'`); err != nil {
		t.Fatal(err)
	}
	serverMem, serverWorkers := settings(t, c)
	if err := pgschema.Create(ctx, c, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `INSERT INTO b.measurements SELECT i, '2018-01-01', i / 40, i % 40 FROM generate_series(1, 100000) i`); err != nil {
		t.Fatal(err)
	}
	var heap int64
	zero := 0
	if err := c.QueryRow(ctx, `SELECT pg_relation_size('b.measurements')`).Scan(&heap); err != nil {
		t.Fatal(err)
	}
	if heap*3/2 <= serverMem {
		t.Fatalf("the table of %d bytes is too small to test AutoMemory", heap)
	}
	for _, tc := range []struct {
		name        string
		build       pgschema.Build
		mem         int64
		workers     int
		wantBuilds  int
		dropFirstly bool
	}{
		{"auto", pgschema.Build{}, heap * 3 / 2, serverWorkers, 5, true},
		{"set", pgschema.Build{Memory: 300 << 20, Workers: &zero}, 300 << 20, 0, 5, true},
		{"server", pgschema.Build{Memory: pgschema.ServerMemory}, serverMem, serverWorkers, 5, true},
		{"nothing to build", pgschema.Build{Memory: 300 << 20, Workers: &zero}, 0, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.dropFirstly {
				if err := pgschema.DropConstraints(ctx, c, "b"); err != nil {
					t.Fatal(err)
				}
			}
			builds := 0
			tc.build.Log = func(string, ...any) {
				builds++
				mem, workers := settings(t, c)
				// PostgreSQL keeps the memory in kB.
				if mem/1024 != tc.mem/1024 || workers != tc.workers {
					t.Errorf("building with maintenance_work_mem %d and max_parallel_maintenance_workers %d, want %d and %d", mem, workers, tc.mem, tc.workers)
				}
			}
			if err := pgschema.BuildConstraints(ctx, c, "b", tc.build); err != nil {
				t.Fatal(err)
			}
			if builds != tc.wantBuilds {
				t.Errorf("%d builds, want %d", builds, tc.wantBuilds)
			}
			if mem, workers := settings(t, c); mem != serverMem || workers != serverWorkers {
				t.Errorf("after the builds the session has %d and %d, the server's %d and %d", mem, workers, serverMem, serverWorkers)
			}
		})
	}
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_index WHERE indrelid IN ('b.measurements'::regclass, 'b.reports'::regclass, 'b.measurement_identities'::regclass)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("%d indexes built, want 5", n)
	}
}
