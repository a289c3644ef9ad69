package store

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// The read side of the judged record. A present volume is judged once on
// the server and its judgement is stored as the columns of the inventory
// tables (inventory_volumes, inventory_findings, inventory_arrays); the
// exporter and the evaluator read those columns here and never the
// stored geometry.

// JudgedVolume is a present volume's judged record as the exporter shows
// it: its columns, its findings and its md arrays.
type JudgedVolume struct {
	JudgedColumns
	// Findings are the distinct (rule, severity) pairs of the volume's
	// findings, worst first.
	Findings []RuleSeverity
	// Arrays are the md arrays below the volume, by device.
	Arrays []RAIDArray
}

// JudgedColumns are a judged record's columns. Sizes and fractions that
// are unknown are -1, as in InventoryVolume.
type JudgedColumns struct {
	ID         string
	AgentID    string
	MountPoint string
	// Hostname is the agent's current host name (agents.hostname).
	Hostname string
	// Sequence is the volumes.sequence the record was judged from.
	Sequence uint64
	Device   string
	FSType   string
	Verdict  string

	DataOffsetBytes     int64
	StripeUnitBytes     int64 // 0 when none is known
	AllocationUnitBytes int64
	RAIDLevel           string
	Media               string
	Profile             string
	// SplitFraction and GranularitySplit per I/O size (vocab.IOSizes
	// order), as in InventoryVolume.
	SplitFraction    [vocab.NumIOSizes]float64
	GranularitySplit [vocab.NumIOSizes]float64
	// StripeUnitSource, StripeUnitConfidence and MeasuredSplitCost (-1:
	// not measured) as in InventoryVolume.
	StripeUnitSource     string
	StripeUnitConfidence float64
	MeasuredSplitCost    float64
	// JudgedAt is when the record was last written (a re-judge moves it
	// on).
	JudgedAt time.Time
}

// RuleSeverity is a finding's rule id and severity.
type RuleSeverity struct {
	Rule     string
	Severity string
}

// RAIDArray is an md array below a judged volume whose raid_disks the
// kernel stated: its device and how many of those disks have no member
// device listed below it.
type RAIDArray struct {
	Device  string
	Missing int
	// Sync is the array's running sync action, zero when none runs.
	Sync ArraySync
}

// ArraySync is an md array's running sync action (resync, recover,
// reshape, check, repair) as the geometry snapshot stated it: progress in
// 512-byte sectors (TotalSectors 0: not stated) and speed (0: not
// stated).
type ArraySync struct {
	Action                    string
	DoneSectors, TotalSectors int64
	SpeedBytesPerSecond       int64
}

// Equal reports whether two judged records hold the same judgement (when
// each was written aside).
func (v *JudgedVolume) Equal(w *JudgedVolume) bool {
	a, b := v.JudgedColumns, w.JudgedColumns
	a.JudgedAt, b.JudgedAt = time.Time{}, time.Time{}
	return a == b && slices.Equal(v.Findings, w.Findings) && slices.Equal(v.Arrays, w.Arrays)
}

// judgedColumns are the columns ListJudgedVolumes reads, of
// inventory_volumes iv joined with agents a (computed once, never
// written).
var judgedColumns = `iv.volume_id, iv.agent_id, iv.mount_point, a.hostname, iv.sequence, iv.device, iv.fs_type, iv.verdict,
    iv.data_offset_bytes, iv.stripe_unit_bytes, iv.allocation_unit_bytes, iv.raid_level, iv.media, iv.profile, ` +
	columnList("iv", splitColumns[:]...) + ", " + columnList("iv", granularityColumns[:]...) +
	`, iv.stripe_unit_source, iv.stripe_unit_confidence, iv.measured_split_cost_seconds, iv.judged_ns`

// ListJudgedVolumes returns the judged record of every present volume, by
// host name, agent and mount point. It reads the judged rows, then their
// findings and arrays: a record written again between those reads also
// moves its entry of ListJudgedSequences, so a reader that read those
// first sees the change next time.
// Repeated strings (host names, devices, verdicts, profiles, rules, ...)
// share one copy.
func (s *Store) ListJudgedVolumes(ctx context.Context) ([]JudgedVolume, error) {
	in := interner{}
	sc := newJudgedScanner(in)
	vols, err := queryAll(ctx, s, "list judged volumes", `SELECT `+judgedColumns+`
FROM inventory_volumes iv JOIN agents a ON a.agent_id = iv.agent_id
ORDER BY a.hostname, iv.agent_id, iv.mount_point`, nil, sc.scan)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*JudgedVolume, len(vols))
	for i := range vols {
		byID[vols[i].ID] = &vols[i]
	}
	var id, a, b sql.RawBytes
	var n int64
	err = eachRow(ctx, s, "list judged findings", `SELECT volume_id, rule, severity FROM inventory_findings ORDER BY volume_id, ordinal`, nil,
		func(row *sql.Rows) (struct{}, error) { return struct{}{}, row.Scan(&id, &a, &b) },
		func(struct{}) error { // the row's bytes are valid until the next row
			if v := byID[string(id)]; v != nil {
				if f := (RuleSeverity{in.str(a), in.str(b)}); !slices.Contains(v.Findings, f) {
					v.Findings = append(v.Findings, f)
				}
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	var sync ArraySync
	err = eachRow(ctx, s, "list judged arrays", `SELECT volume_id, device, missing, sync_action, sync_done_sectors, sync_total_sectors, sync_speed_bps
FROM inventory_arrays ORDER BY volume_id, device`, nil,
		func(row *sql.Rows) (struct{}, error) {
			return struct{}{}, row.Scan(&id, &a, &n, &b, &sync.DoneSectors, &sync.TotalSectors, &sync.SpeedBytesPerSecond)
		},
		func(struct{}) error {
			if v := byID[string(id)]; v != nil {
				sync.Action = in.str(b)
				v.Arrays = append(v.Arrays, RAIDArray{Device: in.str(a), Missing: int(n), Sync: sync})
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return vols, nil
}

// interner shares the repeated strings of a read: each distinct value is
// allocated once.
type interner map[string]string

func (in interner) str(b []byte) string {
	if s, ok := in[string(b)]; ok {
		return s
	}
	s := string(b)
	in[s] = s
	return s
}

// judgedScanner scans judged rows into one set of destinations, reused
// from row to row.
type judgedScanner struct {
	in   interner
	v    JudgedVolume
	seq  int64
	at   int64            // judged_ns
	text [10]sql.RawBytes // the string columns but the volume id, in judgedColumns order
	dest []any
}

func newJudgedScanner(in interner) *judgedScanner {
	sc := &judgedScanner{in: in}
	t, v := &sc.text, &sc.v
	sc.dest = append(make([]any, 0, 18+2*vocab.NumIOSizes), &v.ID, &t[0], &t[1], &t[2], &sc.seq, &t[3], &t[4], &t[5],
		&v.DataOffsetBytes, &v.StripeUnitBytes, &v.AllocationUnitBytes, &t[6], &t[7], &t[8])
	sc.dest = appendSizeDests(sc.dest, &v.SplitFraction)
	sc.dest = appendSizeDests(sc.dest, &v.GranularitySplit)
	sc.dest = append(sc.dest, &t[9], &v.StripeUnitConfidence, &v.MeasuredSplitCost, &sc.at)
	return sc
}

func (sc *judgedScanner) scan(row rowScanner) (JudgedVolume, error) {
	if err := row.Scan(sc.dest...); err != nil {
		return JudgedVolume{}, err
	}
	v, t, str := sc.v, &sc.text, sc.in.str
	v.AgentID, v.MountPoint, v.Hostname, v.Sequence, v.JudgedAt = str(t[0]), str(t[1]), str(t[2]), uint64(sc.seq), fromUnixNano(sc.at)
	v.Device, v.FSType, v.Verdict = str(t[3]), str(t[4]), str(t[5])
	v.RAIDLevel, v.Media, v.Profile, v.StripeUnitSource = str(t[6]), str(t[7]), str(t[8]), str(t[9])
	return v, nil
}

// ListJudgedSequences returns, of each present volume's judged record, the
// sequence it was judged from and when it was last written
// (VolumeSequence.JudgedAt), by agent and mount point: the cheap read that
// tells whether ListJudgedVolumes would return anything new (a record
// changes with a newer snapshot or a re-judge).
func (s *Store) ListJudgedSequences(ctx context.Context) ([]VolumeSequence, error) {
	return queryAll(ctx, s, "list judged sequences", `
SELECT agent_id, mount_point, sequence, judged_ns FROM inventory_volumes ORDER BY agent_id, mount_point`, nil, func(row rowScanner) (VolumeSequence, error) {
		var v VolumeSequence
		var seq, at int64
		err := row.Scan(&v.AgentID, &v.MountPoint, &seq, &at)
		v.Sequence, v.JudgedAt = uint64(seq), fromUnixNano(at)
		return v, err
	})
}

// JudgedProfile is what the evaluator reads of a present volume's judged
// record: its profile and the split fractions the profile's prior is
// priced with (per I/O size, vocab.IOSizes order, -1 unknown).
type JudgedProfile struct {
	AgentID          string
	MountPoint       string
	Profile          string
	SplitFraction    [vocab.NumIOSizes]float64
	GranularitySplit [vocab.NumIOSizes]float64
}

// ListJudgedProfiles returns every present volume's JudgedProfile, by agent
// and mount point.
func (s *Store) ListJudgedProfiles(ctx context.Context) ([]JudgedProfile, error) {
	query := `SELECT agent_id, mount_point, profile, ` + columnList("", splitColumns[:]...) + ", " +
		columnList("", granularityColumns[:]...) + ` FROM inventory_volumes ORDER BY agent_id, mount_point`
	return queryAll(ctx, s, "list judged profiles", query, nil, func(row rowScanner) (JudgedProfile, error) {
		var p JudgedProfile
		dest := make([]any, 0, 3+2*vocab.NumIOSizes)
		dest = append(dest, &p.AgentID, &p.MountPoint, &p.Profile)
		dest = appendSizeDests(dest, &p.SplitFraction)
		dest = appendSizeDests(dest, &p.GranularitySplit)
		return p, row.Scan(dest...)
	})
}
