package store

import (
	"context"
	"database/sql"
)

// queryAll runs a query (placeholders as s.q rewrites them) and returns
// every row scan reads, in order; nil when there are none. Errors are
// wrapped in what. It is eachRow collecting into a slice.
func queryAll[T any](ctx context.Context, s *Store, what, query string, args []any, scan func(rowScanner) (T, error)) ([]T, error) {
	var out []T
	err := eachRow(ctx, s, what, query, args, func(rows *sql.Rows) (T, error) { return scan(rows) }, func(v T) error {
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
