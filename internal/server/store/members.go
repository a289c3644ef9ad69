package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// KindMemberIO is a record of member I/O: one interval of the kernel's
// block-I/O accounting for the sibling members under the agent's volumes.
const KindMemberIO RecordKind = "member-io"

// MemberIO (KindMemberIO) is one interval of member I/O.
type MemberIO struct {
	// StartedAt is the first sample's time; Interval the time to the second.
	StartedAt time.Time
	Interval  time.Duration
	Groups    []MemberGroup
}

// MemberGroup is one set of sibling devices.
type MemberGroup struct {
	// Device is the device whose members these are (md0, dm-3).
	Device string
	// Kind is how they are siblings (vocab.MemberGroupKind).
	Kind string
	// MountPoints are the volumes on the group.
	MountPoints []string
	Members     []MemberCounters
}

// MemberCounters is one member's counter deltas over an interval
// (/proc/diskstats).
type MemberCounters struct {
	Device string
	ByID   []string
	Serial string
	// State is an md member's md/dev-*/state flags.
	State                     []string
	Reads, ReadTimeMS         uint64
	Writes, WriteTimeMS       uint64
	ReadSectors, WriteSectors uint64
	IOTimeMS                  uint64
}

// MemberInterval is one stored member-io record: an agent's interval.
type MemberInterval struct {
	AgentID  string
	Sequence uint64 // the server sequence
	MemberIO
}

// memberIOColumns are member_io's columns in insert order.
const memberIOColumns = `agent_id, sequence, group_device, device, group_kind, mount_points, by_id, serial, state,
    started_ns, interval_ns, reads, read_time_ms, writes, write_time_ms, read_sectors, write_sectors, io_time_ms`

const memberIORowSQL = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// checkMemberIO checks what the store needs of a member-io record: names
// present and every counter within a BIGINT.
func checkMemberIO(m *MemberIO) error {
	if m.Interval <= 0 {
		return fmt.Errorf("member io: interval %s: want > 0", m.Interval)
	}
	for _, g := range m.Groups {
		if g.Device == "" || g.Kind == "" {
			return fmt.Errorf("member io: a group without a device or kind")
		}
		for _, c := range g.Members {
			if c.Device == "" {
				return fmt.Errorf("member io: group %s: a member without a device", g.Device)
			}
			for _, v := range [...]uint64{c.Reads, c.ReadTimeMS, c.Writes, c.WriteTimeMS, c.ReadSectors, c.WriteSectors, c.IOTimeMS} {
				if v > math.MaxInt64 {
					return fmt.Errorf("member io: group %s member %s: counter above 2^63-1", g.Device, c.Device)
				}
			}
		}
	}
	return nil
}

// insertMemberIO stores the member rows of the batch's member-io records.
func (s *Store) insertMemberIO(ctx context.Context, tx *sql.Tx, agentID string, recs []stored) error {
	var args []any
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		q := `INSERT INTO member_io (` + memberIOColumns + `) VALUES ` + tupleList(memberIORowSQL, n)
		if _, err := s.txExec(ctx, tx, s.q(q), args...); err != nil {
			return fmt.Errorf("insert member io: %w", err)
		}
		args, n = args[:0], 0
		return nil
	}
	for _, r := range recs {
		m := r.MemberIO
		for _, g := range m.Groups {
			mounts := strings.Join(g.MountPoints, "\n")
			for _, c := range g.Members {
				args = append(args, agentID, int64(r.server), g.Device, c.Device, g.Kind, mounts,
					strings.Join(c.ByID, "\n"), c.Serial, strings.Join(c.State, ","),
					unixNano(m.StartedAt), int64(m.Interval), int64(c.Reads), int64(c.ReadTimeMS),
					int64(c.Writes), int64(c.WriteTimeMS), int64(c.ReadSectors), int64(c.WriteSectors), int64(c.IOTimeMS))
				if n++; n == s.recordRowsPerInsert() {
					if err := flush(); err != nil {
						return err
					}
				}
			}
		}
	}
	return flush()
}

// splitList is the inverse of strings.Join(xs, sep): nil for "".
func splitList(s, sep string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, sep)
}

// PendingMemberIO returns the member-io records of up to limit intervals
// the member judge has not read yet, by agent and server sequence: those
// above the agent's member watermark and at or below its high-water mark.
// The groups of an interval and their members are in name order.
func (s *Store) PendingMemberIO(ctx context.Context, limit int) ([]MemberInterval, error) {
	var out []MemberInterval
	err := eachRow(ctx, s, "pending member io", `
SELECT m.agent_id, m.sequence, m.group_device, m.device, m.group_kind, m.mount_points, m.by_id, m.serial, m.state,
    m.started_ns, m.interval_ns, m.reads, m.read_time_ms, m.writes, m.write_time_ms, m.read_sectors, m.write_sectors, m.io_time_ms
FROM (SELECT r.agent_id, r.sequence FROM records r
    JOIN agents a ON a.agent_id = r.agent_id
    LEFT JOIN member_watermarks w ON w.agent_id = r.agent_id
    WHERE r.kind = 'member-io' AND r.sequence > COALESCE(w.judged_through, 0) AND r.sequence <= a.high_water
    ORDER BY r.agent_id, r.sequence LIMIT ?) p
JOIN member_io m ON m.agent_id = p.agent_id AND m.sequence = p.sequence
ORDER BY m.agent_id, m.sequence, m.group_device, m.device`, []any{limit}, scanMemberRow, func(r memberRow) error {
		n := len(out)
		if n == 0 || out[n-1].AgentID != r.agentID || out[n-1].Sequence != r.seq {
			out = append(out, MemberInterval{AgentID: r.agentID, Sequence: r.seq,
				MemberIO: MemberIO{StartedAt: r.started, Interval: r.interval}})
			n++
		}
		iv := &out[n-1]
		g := len(iv.Groups)
		if g == 0 || iv.Groups[g-1].Device != r.group.Device {
			iv.Groups = append(iv.Groups, r.group)
			g++
		}
		iv.Groups[g-1].Members = append(iv.Groups[g-1].Members, r.member)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// memberRow is one row of member_io as read.
type memberRow struct {
	agentID  string
	seq      uint64
	group    MemberGroup
	member   MemberCounters
	started  time.Time
	interval time.Duration
}

func scanMemberRow(rows *sql.Rows) (memberRow, error) {
	var r memberRow
	var mounts, byID, state string
	var seq, started, interval, rd, rt, wr, wt, rs, ws, io int64
	if err := rows.Scan(&r.agentID, &seq, &r.group.Device, &r.member.Device, &r.group.Kind, &mounts, &byID, &r.member.Serial, &state,
		&started, &interval, &rd, &rt, &wr, &wt, &rs, &ws, &io); err != nil {
		return r, err
	}
	r.seq, r.started, r.interval = uint64(seq), fromUnixNano(started), time.Duration(interval)
	r.group.MountPoints = splitList(mounts, "\n")
	r.member.ByID, r.member.State = splitList(byID, "\n"), splitList(state, ",")
	r.member.Reads, r.member.ReadTimeMS, r.member.Writes, r.member.WriteTimeMS = uint64(rd), uint64(rt), uint64(wr), uint64(wt)
	r.member.ReadSectors, r.member.WriteSectors, r.member.IOTimeMS = uint64(rs), uint64(ws), uint64(io)
	return r, nil
}

// MemberState is the member judge's state of one member.
type MemberState struct {
	AgentID     string
	GroupDevice string
	Device      string
	GroupKind   string
	MountPoints []string
	ByID        []string
	Serial      string
	// Slow: the member is named slow, since Since, in Direction (read or
	// write), Ratio times its siblings' await.
	Slow      bool
	Since     time.Time
	Direction string
	Ratio     float64
	// The member's await and its siblings' median in the last interval
	// judged, and the same of the utilisation (0..1).
	AwaitSeconds         float64
	SiblingsAwaitSeconds float64
	Utilisation          float64
	SiblingsUtilisation  float64
	// Recent says which of the last intervals judged were beyond the
	// siblings (bit 0 the newest; column beyond); StreakStart is the start
	// of the oldest of them still counted (zero when none is); Normal
	// counts normal intervals in a row while named.
	Recent      uint32
	StreakStart time.Time
	Normal      int
	// Drift is the CUSUM of the member's log await ratio to its siblings
	// over the judge's reference (0 when at or below it); DriftStart the
	// start of the interval it last rose from 0 (zero when it is 0).
	Drift      float64
	DriftStart time.Time
	// Last is the end of the last interval judged.
	Last time.Time
}

const memberStateColumns = `agent_id, group_device, device, group_kind, mount_points, by_id, serial, slow, since_ns, direction,
    ratio, await_seconds, siblings_await_seconds, utilisation, siblings_utilisation, beyond, normal, streak_ns, last_ns, drift, drift_ns`

func scanMemberState(row rowScanner) (MemberState, error) {
	var m MemberState
	var mounts, byID string
	var since, recent, streak, last, drift int64
	err := row.Scan(&m.AgentID, &m.GroupDevice, &m.Device, &m.GroupKind, &mounts, &byID, &m.Serial, &m.Slow, &since, &m.Direction,
		&m.Ratio, &m.AwaitSeconds, &m.SiblingsAwaitSeconds, &m.Utilisation, &m.SiblingsUtilisation, &recent, &m.Normal, &streak, &last,
		&m.Drift, &drift)
	m.MountPoints, m.ByID = splitList(mounts, "\n"), splitList(byID, "\n")
	m.Since, m.Recent, m.StreakStart, m.Last = fromUnixNano(since), uint32(recent), fromUnixNano(streak), fromUnixNano(last)
	m.DriftStart = fromUnixNano(drift)
	return m, err
}

// ListMemberStates returns every member state, by agent, group and device.
func (s *Store) ListMemberStates(ctx context.Context) ([]MemberState, error) {
	return queryAll(ctx, s, "member states", `SELECT `+memberStateColumns+` FROM member_states
ORDER BY agent_id, group_device, device`, nil, scanMemberState)
}

// ListSlowMembers returns the members named slow, by agent, group and
// device.
func (s *Store) ListSlowMembers(ctx context.Context) ([]MemberState, error) {
	return queryAll(ctx, s, "slow members", `SELECT `+memberStateColumns+` FROM member_states WHERE slow
ORDER BY agent_id, group_device, device`, nil, scanMemberState)
}

// MemberKey names one member of one agent's group.
type MemberKey struct{ AgentID, GroupDevice, Device string }

// MemberPass is what one pass of the member judge writes, at once.
type MemberPass struct {
	// States are written whole (inserted or replaced).
	States []MemberState
	// Removed are members no longer reported.
	Removed []MemberKey
	// Watermarks are the last server sequence read, per agent; a
	// watermark never moves back.
	Watermarks map[string]uint64
	// Inventory are the agents whose volumes' slow members (the inventory
	// rows' slow_members) are derived again from their states: those with
	// a member named slow before or after the pass.
	Inventory []string
}

// SaveMemberPass writes a member judge's pass in one transaction (fenced
// when ctx is).
func (s *Store) SaveMemberPass(ctx context.Context, p MemberPass) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, k := range p.Removed {
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM member_states WHERE agent_id = ? AND group_device = ? AND device = ?`),
				k.AgentID, k.GroupDevice, k.Device); err != nil {
				return fmt.Errorf("remove member state: %w", err)
			}
		}
		for chunk := range slices.Chunk(p.States, rowsPerInsert/2) {
			q := `INSERT INTO member_states (` + memberStateColumns + `) VALUES ` +
				tupleList("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", len(chunk)) + `
ON CONFLICT (agent_id, group_device, device) DO UPDATE SET group_kind = excluded.group_kind, mount_points = excluded.mount_points,
    by_id = excluded.by_id, serial = excluded.serial, slow = excluded.slow, since_ns = excluded.since_ns,
    direction = excluded.direction, ratio = excluded.ratio, await_seconds = excluded.await_seconds,
    siblings_await_seconds = excluded.siblings_await_seconds, utilisation = excluded.utilisation,
    siblings_utilisation = excluded.siblings_utilisation, beyond = excluded.beyond, normal = excluded.normal,
    streak_ns = excluded.streak_ns, last_ns = excluded.last_ns, drift = excluded.drift, drift_ns = excluded.drift_ns`
			args := make([]any, 0, len(chunk)*21)
			for _, m := range chunk {
				args = append(args, m.AgentID, m.GroupDevice, m.Device, m.GroupKind, strings.Join(m.MountPoints, "\n"),
					strings.Join(m.ByID, "\n"), m.Serial, m.Slow, unixNano(m.Since), m.Direction, finite(m.Ratio),
					finite(m.AwaitSeconds), finite(m.SiblingsAwaitSeconds), finite(m.Utilisation), finite(m.SiblingsUtilisation),
					int64(m.Recent), m.Normal, unixNano(m.StreakStart), unixNano(m.Last), finite(m.Drift), unixNano(m.DriftStart))
			}
			if _, err := tx.ExecContext(ctx, s.q(q), args...); err != nil {
				return fmt.Errorf("member states: %w", err)
			}
		}
		if err := s.writeInventoryMembers(ctx, tx, p.Inventory); err != nil {
			return err
		}
		agents := make([]string, 0, len(p.Watermarks))
		for a := range p.Watermarks {
			agents = append(agents, a)
		}
		slices.Sort(agents)
		for _, a := range agents {
			if _, err := tx.ExecContext(ctx, s.q(`
INSERT INTO member_watermarks (agent_id, judged_through) VALUES (?, ?)
ON CONFLICT (agent_id) DO UPDATE SET judged_through = CASE
    WHEN member_watermarks.judged_through < excluded.judged_through THEN excluded.judged_through
    ELSE member_watermarks.judged_through END`), a, int64(p.Watermarks[a])); err != nil {
				return fmt.Errorf("member watermark of %q: %w", a, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save member pass: %w", err)
	}
	return nil
}

// finite is x, or 0 for NaN and the infinities (which neither engine's
// DOUBLE PRECISION column takes alike).
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
