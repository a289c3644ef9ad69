package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// InventoryHost is an agent with its volume counts.
type InventoryHost struct {
	Agent
	Volumes    int64
	Misaligned int64
}

// HostQuery selects and pages hosts, ordered by hostname and agent id.
type HostQuery struct {
	// Host is a hostname, exact or a glob (as VolumeFilter.Host).
	Host  string
	Desc  bool
	After []any // hostname, agent_id of the previous page's last host
	Limit int
}

const hostColumns = agentColumns + `,
    (SELECT COUNT(*) FROM inventory_volumes f WHERE f.agent_id = a.agent_id),
    (SELECT COUNT(*) FROM inventory_volumes f WHERE f.agent_id = a.agent_id AND f.verdict = 'misaligned')`

func scanHost(rows *sql.Rows) (*InventoryHost, error) {
	var h InventoryHost
	a, err := scanAgent(rows, &h.Volumes, &h.Misaligned)
	if err != nil {
		return nil, err
	}
	h.Agent = a
	return &h, nil
}

// QueryHosts calls fn with each host the query selects, in order, streaming.
func (s *Store) QueryHosts(ctx context.Context, q HostQuery, fn func(*InventoryHost) error) error {
	var args []any
	var c []string
	if q.Host != "" {
		c = append(c, s.match("a.hostname", q.Host, &args))
	}
	op, dir := ">", ""
	if q.Desc {
		op, dir = "<", " DESC"
	}
	if q.After != nil {
		if len(q.After) != 2 {
			return fmt.Errorf("query hosts: %w: keyset of %d values: want 2", ErrInvalid, len(q.After))
		}
		c = append(c, "(a.hostname, a.agent_id) "+op+" (?, ?)")
		args = append(args, q.After...)
	}
	where := "TRUE"
	if len(c) > 0 {
		where = strings.Join(c, " AND ")
	}
	query := `SELECT ` + hostColumns + ` FROM agents a WHERE ` + where + ` ORDER BY a.hostname` + dir + `, a.agent_id` + dir
	if q.Limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", q.Limit)
	}
	return eachRow(ctx, s, "query hosts", query, args, scanHost, fn)
}

// FindHost returns the agent whose id is key or, failing that, whose
// hostname is key (the most recently seen one when several share it);
// ErrNotFound when none is.
func (s *Store) FindHost(ctx context.Context, key string) (*InventoryHost, error) {
	for _, cond := range []string{"a.agent_id = ?", "a.hostname = ?"} {
		h, err := firstRow(ctx, s, fmt.Sprintf("host %q", key), `SELECT `+hostColumns+` FROM agents a WHERE `+cond+`
ORDER BY a.last_seen_ns DESC, a.agent_id LIMIT 1`, []any{key}, scanHost)
		if err != nil || h != nil {
			return h, err
		}
	}
	return nil, fmt.Errorf("host %q: %w", key, ErrNotFound)
}
