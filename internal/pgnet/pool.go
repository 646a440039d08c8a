package pgnet

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool connects a pool of up to conns connections with the network bounds,
// the tables looked up in schema when given. A transaction left waiting on
// a client longer than timeout is ended by the server, its locks with it.
func Pool(ctx context.Context, dsn, schema string, conns int, timeout time.Duration) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("--dsn: %s", Redact(err.Error(), dsn))
	}
	cfg.MaxConns = int32(conns)
	cfg.ConnConfig.DialFunc = Dial
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(timeout.Milliseconds(), 10)
	if schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, Named(cfg.ConnConfig, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, Named(cfg.ConnConfig, fmt.Errorf("cannot connect: %w", err))
	}
	return pool, nil
}
