// Package store opens the Postgres metadata store (GORM over pgx) and applies schema migrations.
package store

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/cohort-dev/cohort/internal/telemetry"
)

// DB is the metadata store: one pgx pool, and GORM over the same pool. Which code uses which is
// in internal/README.md (GORM or pgx).
type DB struct {
	Gorm *gorm.DB
	Pool *pgxpool.Pool
	sql  *sql.DB
}

// Options tune the connection pool.
type Options struct {
	MaxConns int32
	Logger   *slog.Logger
}

// Open connects to Postgres at url and verifies the connection.
func Open(ctx context.Context, url string, opts Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	} else if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	cfg.MaxConnIdleTime = 5 * time.Minute
	// A client span per query, batch and COPY under the caller's span (no argument values).
	cfg.ConnConfig.Tracer = telemetry.PgxTracer{}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	gcfg := &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		PrepareStmt:            false,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	}
	if opts.Logger != nil {
		gcfg.Logger = slowQueryLogger{logger.NewSlogLogger(opts.Logger, logger.Config{
			SlowThreshold:             500 * time.Millisecond,
			LogLevel:                  logger.Warn,
			IgnoreRecordNotFoundError: true,
			ParameterizedQueries:      true,
		})}
	}
	gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), gcfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open gorm: %w", err)
	}
	return &DB{Gorm: gdb, Pool: pool, sql: sqlDB}, nil
}

// Ping checks that the database answers.
func (d *DB) Ping(ctx context.Context) error { return d.Pool.Ping(ctx) }

// Close releases every connection.
func (d *DB) Close() {
	_ = d.sql.Close()
	d.Pool.Close()
}

// slowQueryLogger logs slow queries only: failed queries are returned to the caller, who decides
// (log or return, not both), so an expected unique violation does not show up as an error line.
type slowQueryLogger struct{ logger.Interface }

func (l slowQueryLogger) LogMode(level logger.LogLevel) logger.Interface {
	return slowQueryLogger{l.Interface.LogMode(level)}
}

func (l slowQueryLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), _ error) {
	l.Interface.Trace(ctx, begin, fc, nil)
}
