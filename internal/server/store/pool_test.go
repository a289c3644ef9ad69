package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
)

func TestPoolFromDSN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dsn, wantDSN string
		want         poolConfig
		wantErr      string
	}{
		{dsn: "postgres://u@h/db?sslmode=disable", wantDSN: "postgres://u@h/db?sslmode=disable",
			want: poolConfig{maxConns: pgDefaultMaxConns, maxIdleTime: defaultMaxIdleTime}},
		{dsn: "postgres://u@h/db", wantDSN: "postgres://u@h/db",
			want: poolConfig{maxConns: pgDefaultMaxConns, maxIdleTime: defaultMaxIdleTime}},
		{dsn: "postgres://u@h/db?sslmode=disable&pool_max_conns=40&pool_max_conn_idle_time=30s", wantDSN: "postgres://u@h/db?sslmode=disable",
			want: poolConfig{maxConns: 40, maxIdleTime: 30 * time.Second}},
		{dsn: "postgresql://u:secret@h:5433/db?pool_max_conns=2", wantDSN: "postgresql://u:secret@h:5433/db",
			want: poolConfig{maxConns: 2, maxIdleTime: defaultMaxIdleTime}},
		{dsn: "postgres://u@h/db?pool_max_conns=1", wantErr: `pool_max_conns "1": want a whole number, at least 2`},
		{dsn: "postgres://u@h/db?pool_max_conns=many", wantErr: `pool_max_conns "many": want a whole number, at least 2`},
		{dsn: "postgres://u@h/db?pool_max_conn_idle_time=5", wantErr: `pool_max_conn_idle_time "5": want a duration such as 5m (0: never closed)`},
	} {
		gotDSN, got, err := poolFromDSN(tc.dsn)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("poolFromDSN(%q) error = %v, want %q", tc.dsn, err, tc.wantErr)
			}
			continue
		}
		if err != nil || gotDSN != tc.wantDSN || got != tc.want {
			t.Errorf("poolFromDSN(%q) = %q, %+v, %v; want %q, %+v, nil", tc.dsn, gotDSN, got, err, tc.wantDSN, tc.want)
		}
	}
}

// TestOpenBadPoolParameter: a bad pool parameter is a DSN error, and the
// password stays hidden.
func TestOpenBadPoolParameter(t *testing.T) {
	t.Parallel()
	_, err := Open(context.Background(), "postgres://u:secret@127.0.0.1:1/db?pool_max_conns=0")
	if !errors.Is(err, ErrDSN) || strings.Contains(err.Error(), "secret") {
		t.Errorf("Open with pool_max_conns=0: %v, want ErrDSN without the password", err)
	}
}

// TestPoolBoundedUnderLoad: far more concurrent batches than the pool has
// connections all succeed, and the server never sees more of this Store's
// connections than pool_max_conns (the fleet benchmark's PostgreSQL
// failure: an unbounded pool ran into max_connections).
func TestPoolBoundedUnderLoad(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	const maxConns = 4
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	s := open(t, dsn+sep+fmt.Sprintf("pool_max_conns=%d&pool_max_conn_idle_time=1m", maxConns))
	ctx := context.Background()
	const agents, batches, per = 100, 3, 10
	for i := range agents {
		register(t, s, fmt.Sprintf("p%03d", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, agents)
	for i := range agents {
		id := fmt.Sprintf("p%03d", i)
		wg.Go(func() {
			for b := range batches {
				from := uint64(b*per + 1)
				if _, err := s.AppendBatchFrom(ctx, id, "", from, probeRecords(from, from+per-1)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := s.db.Stats(); st.MaxOpenConnections != maxConns || st.OpenConnections > maxConns {
		t.Errorf("pool stats %+v: want at most %d connections", st, maxConns)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n > maxConns {
		t.Errorf("pg_stat_activity: %d connections to the database, want at most %d", n, maxConns)
	}
	if got, want := count(t, s, "records"), agents*batches*per; got != want {
		t.Errorf("records = %d, want %d", got, want)
	}
}
