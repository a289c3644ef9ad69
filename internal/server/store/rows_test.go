package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestQueryAll(t *testing.T) {
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		for _, id := range []string{"c", "a", "b"} {
			register(t, s, id)
		}
		id := func(row rowScanner) (string, error) {
			var v string
			err := row.Scan(&v)
			return v, err
		}
		errScan := errors.New("scan refused")
		tests := []struct {
			name    string
			query   string
			args    []any
			scan    func(rowScanner) (string, error)
			want    []string
			wantErr error // nil: no error; else errors.Is target, or errAny
		}{
			{name: "rows in order, args bound", query: `SELECT agent_id FROM agents WHERE agent_id <> ? ORDER BY agent_id`, args: []any{"b"}, scan: id, want: []string{"a", "c"}},
			{name: "two placeholders", query: `SELECT agent_id FROM agents WHERE agent_id = ? OR agent_id = ? ORDER BY agent_id DESC`, args: []any{"a", "c"}, scan: id, want: []string{"c", "a"}},
			{name: "no rows is nil", query: `SELECT agent_id FROM agents WHERE agent_id = ?`, args: []any{"none"}, scan: id, want: nil},
			{name: "scan error", query: `SELECT agent_id FROM agents`, scan: func(row rowScanner) (string, error) {
				v, _ := id(row)
				return v, errScan
			}, wantErr: errScan},
			{name: "query error", query: `SELECT no_such_column FROM agents`, scan: id, wantErr: errAny},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				got, err := queryAll(ctx, s, "agent ids", tc.query, tc.args, tc.scan)
				switch {
				case tc.wantErr == nil && err != nil:
					t.Fatalf("queryAll(%q) error %v, want none", tc.query, err)
				case tc.wantErr != nil && err == nil:
					t.Fatalf("queryAll(%q) = %v, want an error", tc.query, got)
				case tc.wantErr != nil:
					if tc.wantErr != errAny && !errors.Is(err, tc.wantErr) {
						t.Errorf("queryAll(%q) error %v, want %v", tc.query, err, tc.wantErr)
					}
					if !strings.HasPrefix(err.Error(), "agent ids: ") {
						t.Errorf("queryAll(%q) error %q, want it prefixed with what (%q)", tc.query, err, "agent ids: ")
					}
				}
				if diff := cmp.Diff(tc.want, got); diff != "" || (tc.want == nil) != (got == nil) {
					t.Errorf("queryAll(%q) mismatch (-want +got):\n%s (want nil: %v, got nil: %v)", tc.query, diff, tc.want == nil, got == nil)
				}
			})
		}
	})
}

// errAny stands for "some error" where the engine's text differs.
var errAny = errors.New("any error")
