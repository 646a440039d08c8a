package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/backfill-dev/backfill/cumulus/cumulusdb"
	"github.com/backfill-dev/backfill/cumulus/dla"
	"github.com/backfill-dev/backfill/cumulus/records"
	"github.com/backfill-dev/backfill/cumulus/replay"
	"github.com/backfill-dev/backfill/internal/cumulustest"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// granuleMessages is msgs completed messages of perMsg granules, each
// granule with two files, as JSON lines.
func granuleMessages(msgs, perMsg int) []byte {
	var b bytes.Buffer
	for i := range msgs {
		var gs []any
		for k := range perMsg {
			id := fmt.Sprintf("G%06d.%02d", i, k)
			gs = append(gs, map[string]any{"granuleId": id, "published": true, "cmrLink": "https://cmr/" + id,
				"files": []any{
					map[string]any{"bucket": "protected", "key": id + ".hdf", "fileName": id + ".hdf", "size": 1000.0, "checksumType": "md5", "checksum": "abc"},
					map[string]any{"bucket": "public", "key": id + ".jpg", "fileName": id + ".jpg", "size": 10.0},
				}})
		}
		m := map[string]any{
			"cumulus_meta": map[string]any{"state_machine": "arn:aws:states:us-east-1:1:stateMachine:Ingest",
				"execution_name": fmt.Sprintf("exec-%06d", i), "workflow_start_time": 1700000000000.0 + float64(i)},
			"meta": map[string]any{"status": "completed", "workflow_name": "Ingest",
				"collection": map[string]any{"name": "MOD09GQ", "version": "006"},
				"provider":   map[string]any{"id": "s3_provider", "protocol": "s3", "host": "h"}},
			"payload": map[string]any{"granules": gs},
		}
		line, _ := json.Marshal(m)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func granuleDB(b *testing.B) (*pgxpool.Pool, string) {
	url := pgtest.NewDatabase(b)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if err := cumulusdb.CreateTables(context.Background(), pool); err != nil {
		b.Fatal(err)
	}
	cumulustest.Seed(b, url)
	return pool, url
}

// bareInsert writes the same rows (execution, granule, files, join row)
// with plain INSERT … ON CONFLICT statements, batch messages per
// transaction, on one connection: the floor of the database work.
func bareInsert(b *testing.B, pool *pgxpool.Pool, msgs, perMsg, batch int) {
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	var coll, prov int64
	testutil.Check(b, conn.QueryRow(ctx, "SELECT cumulus_id FROM collections WHERE name = 'MOD09GQ'").Scan(&coll))
	testutil.Check(b, conn.QueryRow(ctx, "SELECT cumulus_id FROM providers WHERE name = 's3_provider'").Scan(&prov))
	for start := 0; start < msgs; start += batch {
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for i := start; i < min(start+batch, msgs); i++ {
			var exec int64
			arn := fmt.Sprintf("arn:aws:states:us-east-1:1:execution:Ingest:exec-%06d", i)
			if err := tx.QueryRow(ctx, `INSERT INTO executions (arn, url, status, workflow_name, collection_cumulus_id, created_at, updated_at, timestamp)
				VALUES ($1, $2, 'completed', 'Ingest', $3, now(), now(), now())
				ON CONFLICT (arn) DO UPDATE SET status = EXCLUDED.status RETURNING cumulus_id`, arn, "https://console/"+arn, coll).Scan(&exec); err != nil {
				b.Fatal(err)
			}
			for k := range perMsg {
				id := fmt.Sprintf("G%06d.%02d", i, k)
				var g int64
				if err := tx.QueryRow(ctx, `INSERT INTO granules (granule_id, producer_granule_id, status, collection_cumulus_id, provider_cumulus_id, published, cmr_link, product_volume, created_at, updated_at, timestamp)
					VALUES ($1, $1, 'completed', $2, $3, true, $4, 1010, now(), now(), now())
					ON CONFLICT (granule_id, collection_cumulus_id) DO UPDATE SET status = EXCLUDED.status, updated_at = EXCLUDED.updated_at
					WHERE granules.created_at <= EXCLUDED.created_at RETURNING cumulus_id`, id, coll, prov, "https://cmr/"+id).Scan(&g); err != nil {
					b.Fatal(err)
				}
				tx.Exec(ctx, `INSERT INTO granules_executions (granule_cumulus_id, execution_cumulus_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, g, exec)
				for _, f := range [][3]any{{"protected", id + ".hdf", 1000}, {"public", id + ".jpg", 10}} {
					if _, err := tx.Exec(ctx, `INSERT INTO files (granule_cumulus_id, bucket, key, file_size) VALUES ($1, $2, $3, $4)
						ON CONFLICT (bucket, key) DO UPDATE SET file_size = EXCLUDED.file_size`, g, f[0], f[1], f[2]); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGranuleWrite: granule messages per second into Postgres with
// 1 and 10 granules per message, written as Cumulus writes them (every
// statement on its own, one message at a time), in batches, and in
// batches with 4 writers; beside the bare INSERT … ON CONFLICT of the
// same rows in batches of 100, measured in the same run
// (pct_of_bare = speed as a percentage of it).
func BenchmarkGranuleWrite(b *testing.B) {
	for _, shape := range []struct{ msgs, perMsg int }{{3000, 1}, {600, 10}} {
		input := granuleMessages(shape.msgs, shape.perMsg)
		var bare time.Duration
		b.Run(fmt.Sprintf("granules=%d/bare-insert", shape.perMsg), func(b *testing.B) {
			for range b.N {
				pool, _ := granuleDB(b)
				start := time.Now()
				bareInsert(b, pool, shape.msgs, shape.perMsg, 100)
				bare = time.Since(start)
			}
			b.ReportMetric(float64(shape.msgs)/bare.Seconds(), "msgs/s")
		})
		for _, cfg := range []struct{ batch, conc int }{{1, 1}, {100, 1}, {100, 4}} {
			b.Run(fmt.Sprintf("granules=%d/batch=%d/writers=%d", shape.perMsg, cfg.batch, cfg.conc), func(b *testing.B) {
				var took time.Duration
				for range b.N {
					pool, _ := granuleDB(b)
					w := records.New(pool, records.Options{Now: func() int64 { return time.Now().UnixMilli() }})
					arch := dla.New(store.Local(b.TempDir()))
					start := time.Now()
					st, err := replay.Write(context.Background(), []string{"-"}, bytes.NewReader(input), w, arch,
						replay.Options{Batch: cfg.batch, Concurrency: cfg.conc})
					took = time.Since(start)
					if err != nil || st.Archived != 0 || st.GranulesWritten != shape.msgs*shape.perMsg {
						b.Fatalf("%v %+v", err, st)
					}
				}
				b.ReportMetric(float64(shape.msgs)/took.Seconds(), "msgs/s")
				b.ReportMetric(float64(shape.msgs*shape.perMsg)/took.Seconds()*3600, "granules/h")
				if bare > 0 {
					b.ReportMetric(100*bare.Seconds()/took.Seconds(), "pct_of_bare")
				}
			})
		}
	}
}
