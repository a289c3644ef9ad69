package ingest

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// ErrInvalidRequest is wrapped by every error ValidateReport returns: the
// request envelope is malformed (the whole request is refused with
// InvalidArgument). A bad record inside a good envelope is not an error but
// a Rejection.
var ErrInvalidRequest = errors.New("invalid request")

// Limits bound what one request may carry. The zero value of a field means
// its default (DefaultLimits).
type Limits struct {
	// MaxBatchRecords is the most records one ReportRequest may carry; it
	// is also announced in HelloResponse.max_batch_records.
	MaxBatchRecords int
	// MaxVolumes is the most volumes one geometry snapshot may list.
	MaxVolumes int
	// MaxLayers is the most layers one volume may list.
	MaxLayers int
	// MaxStringBytes bounds every string field of a record.
	MaxStringBytes int
	// MaxListLen bounds every other repeated or map field of a record
	// (findings, unknowns, sources, histogram buckets are bounded by
	// wire.MaxBuckets anyway).
	MaxListLen int
	// MaxClockSkew is how far in the future (by the server's clock) a
	// record's timestamps may be.
	MaxClockSkew time.Duration
}

// DefaultLimits are the limits a zero Limits field falls back to.
func DefaultLimits() Limits {
	return Limits{
		MaxBatchRecords: 1000,
		MaxVolumes:      4096,
		MaxLayers:       256,
		MaxStringBytes:  4096,
		MaxListLen:      1024,
		MaxClockSkew:    24 * time.Hour,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	// A limit not above 0 is the default.
	l.MaxBatchRecords = cmp.Or(max(l.MaxBatchRecords, 0), d.MaxBatchRecords)
	l.MaxVolumes = cmp.Or(max(l.MaxVolumes, 0), d.MaxVolumes)
	l.MaxLayers = cmp.Or(max(l.MaxLayers, 0), d.MaxLayers)
	l.MaxStringBytes = cmp.Or(max(l.MaxStringBytes, 0), d.MaxStringBytes)
	l.MaxListLen = cmp.Or(max(l.MaxListLen, 0), d.MaxListLen)
	l.MaxClockSkew = cmp.Or(max(l.MaxClockSkew, 0), d.MaxClockSkew)
	return l
}

// earliest is the oldest timestamp a record may carry: anything before it
// is a host clock that was never set.
var earliest = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// maxProbeDuration bounds a probe run's measured phase.
const maxProbeDuration = 24 * time.Hour

// Batch is a validated ReportRequest, ready for the store.
type Batch struct {
	// FirstSequence is ReportRequest.first_sequence (0: not stated).
	FirstSequence uint64
	// Records are every record of the request, in ascending sequence
	// order: the good ones as geometry or probe records, the bad ones as
	// rejected records.
	Records []store.Record
	// Rejections say why each rejected record was refused, ascending.
	Rejections []*plumblinev1.Rejection
}

// ValidateReport checks a ReportRequest and converts it for the store. It
// does not check the agent id (that is the caller's, against the
// connection's identity). A malformed envelope — too many records, a
// sequence of 0, sequences out of order, a first_sequence above the first
// record — is an error wrapping ErrInvalidRequest. A malformed record is a
// rejected record with a reason; the rest of the batch is unaffected.
// Every geometry snapshot's volumes are re-evaluated with align.Evaluate.
func ValidateReport(req *plumblinev1.ReportRequest, lim Limits, now time.Time) (*Batch, error) {
	lim = lim.withDefaults()
	if req == nil {
		return nil, fmt.Errorf("%w: no request", ErrInvalidRequest)
	}
	recs := req.GetRecords()
	if len(recs) > lim.MaxBatchRecords {
		return nil, fmt.Errorf("%w: %d records in one batch: want at most %d", ErrInvalidRequest, len(recs), lim.MaxBatchRecords)
	}
	first := req.GetFirstSequence()
	if first > math.MaxInt64 {
		return nil, fmt.Errorf("%w: first_sequence %d: want at most 2^63-1", ErrInvalidRequest, first)
	}
	var prev uint64
	for i, r := range recs {
		if r == nil {
			return nil, fmt.Errorf("%w: records[%d]: null record", ErrInvalidRequest, i)
		}
		seq := r.GetSequence()
		if seq == 0 || seq > math.MaxInt64 {
			return nil, fmt.Errorf("%w: records[%d]: sequence %d: want 1 to 2^63-1", ErrInvalidRequest, i, seq)
		}
		if i > 0 && seq <= prev {
			return nil, fmt.Errorf("%w: records[%d]: sequence %d after %d: want strictly ascending sequences", ErrInvalidRequest, i, seq, prev)
		}
		prev = seq
	}
	if first > 0 && len(recs) > 0 && first > recs[0].GetSequence() {
		return nil, fmt.Errorf("%w: first_sequence %d above the batch's first sequence %d", ErrInvalidRequest, first, recs[0].GetSequence())
	}

	b := &Batch{FirstSequence: first, Records: make([]store.Record, 0, len(recs))}
	for _, r := range recs {
		// Only what the server understands is stored: fields of a newer
		// (or hostile) agent that this server does not know are dropped.
		discardUnknown(r.ProtoReflect(), 0)
		payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("%w: sequence %d: %w", ErrInvalidRequest, r.GetSequence(), err)
		}
		sr, err := convertRecord(r, lim, now)
		if err != nil {
			reason := truncateUTF8(err.Error(), MaxReasonBytes)
			b.Records = append(b.Records, store.Record{
				Sequence:   r.GetSequence(),
				Kind:       store.KindRejected,
				ProducedAt: saneTime(r.GetProducedAt().AsTime(), now, lim),
				// The sequence and a short reason, nothing of the record:
				// a rejected record is kept only to settle its sequence and
				// to say what was wrong (the agent got the whole reason
				// and logs it). An agent sending nothing but bad records
				// costs MaxStoredReasonBytes and a row per record, within
				// its storage quota.
				Payload: []byte{},
				Reason:  truncateUTF8(reason, MaxStoredReasonBytes),
			})
			b.Rejections = append(b.Rejections, &plumblinev1.Rejection{Sequence: r.GetSequence(), Reason: reason})
			continue
		}
		sr.Payload = payload
		b.Records = append(b.Records, sr)
	}
	return b, nil
}

// MaxStoredReasonBytes bounds the reason stored with a rejected record
// (the agent is sent up to MaxReasonBytes).
const MaxStoredReasonBytes = 256

// MaxReasonBytes bounds a rejection reason (stored, logged and sent back).
const MaxReasonBytes = 1 << 10

// saneTime is t when it passes the timestamp checks, else the zero time (a
// rejected record keeps no absurd time in a query column).
func saneTime(t, now time.Time, lim Limits) time.Time {
	if t.Before(earliest) || t.After(now.Add(lim.MaxClockSkew)) {
		return time.Time{}
	}
	return t
}

// convertRecord checks one record and converts it; an error is the
// rejection reason.
func convertRecord(r *plumblinev1.Record, lim Limits, now time.Time) (rec store.Record, err error) {
	// align.Evaluate and the checks below are written not to panic on any
	// input; should one ever do, the record is rejected, not the server.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error while checking the record: %v", p)
		}
	}()
	if err := checkGeneric(r.ProtoReflect(), "record", lim, 0); err != nil {
		return store.Record{}, err
	}
	produced, err := checkTime(r.GetProducedAt(), "produced_at", now, lim)
	if err != nil {
		return store.Record{}, err
	}
	rec = store.Record{Sequence: r.GetSequence(), ProducedAt: produced}
	switch p := r.GetPayload().(type) {
	case *plumblinev1.Record_Geometry:
		if p.Geometry == nil {
			return store.Record{}, errors.New("geometry: empty payload")
		}
		if err := checkRAIDHealth(p.Geometry); err != nil {
			return store.Record{}, fmt.Errorf("geometry: %w", err)
		}
		vols, err := convertGeometry(p.Geometry, lim)
		if err != nil {
			return store.Record{}, fmt.Errorf("geometry: %w", err)
		}
		if d := p.Geometry.GetDigest(); len(d) != 0 && len(d) != sha256.Size {
			return store.Record{}, fmt.Errorf("geometry: digest of %d bytes: want %d (SHA-256) or none", len(d), sha256.Size)
		}
		rec.Kind, rec.Volumes = store.KindGeometry, vols
		rec.GeometryDigest = hex.EncodeToString(p.Geometry.GetDigest())
	case *plumblinev1.Record_Probe:
		if p.Probe == nil {
			return store.Record{}, errors.New("probe: empty payload")
		}
		pr, err := convertProbe(p.Probe, now, lim)
		if err != nil {
			return store.Record{}, fmt.Errorf("probe: %w", err)
		}
		rec.Kind, rec.Probe = store.KindProbe, pr
	case *plumblinev1.Record_MemberIo:
		if p.MemberIo == nil {
			return store.Record{}, errors.New("member_io: empty payload")
		}
		m, err := convertMemberIO(p.MemberIo, now, lim)
		if err != nil {
			return store.Record{}, fmt.Errorf("member_io: %w", err)
		}
		rec.Kind, rec.MemberIO = store.KindMemberIO, m
	case *plumblinev1.Record_DatabaseIo:
		if p.DatabaseIo == nil {
			return store.Record{}, errors.New("database_io: empty payload")
		}
		d, err := convertDatabaseIO(p.DatabaseIo, now, lim)
		if err != nil {
			return store.Record{}, fmt.Errorf("database_io: %w", err)
		}
		rec.Kind, rec.Database = store.KindDatabase, d
	default:
		return store.Record{}, errors.New("no payload: want geometry, probe, member_io or database_io")
	}
	return rec, nil
}

func checkTime(ts *timestamppb.Timestamp, name string, now time.Time, lim Limits) (time.Time, error) {
	if ts == nil {
		return time.Time{}, fmt.Errorf("%s missing", name)
	}
	if err := ts.CheckValid(); err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", name, err)
	}
	t := ts.AsTime()
	if t.Before(earliest) {
		return time.Time{}, fmt.Errorf("%s %s: before %s (host clock not set?)", name, t.Format(time.RFC3339), earliest.Format("2006-01-02"))
	}
	if t.After(now.Add(lim.MaxClockSkew)) {
		return time.Time{}, fmt.Errorf("%s %s: more than %s ahead of the server's clock (%s)", name, t.Format(time.RFC3339), lim.MaxClockSkew, now.UTC().Format(time.RFC3339))
	}
	return t, nil
}

// maxRAIDMembers bounds the members one md layer's health may list (the
// agent reads no more).
const maxRAIDMembers = 1024

// maxBadBlockRanges bounds a member's bad-block ranges: md lists them in
// one page of at most 64 KiB, four bytes a range at the least.
const maxBadBlockRanges = 64 << 10 / 4

// checkRAIDHealth checks what an agent says of its md arrays' health
// (Layer.raid_health), beyond checkGeneric's lengths: it sits on a RAID
// layer, its words are word-shaped (an unknown word is kept, not
// refused), and its counts add up against the layer's raid_disks.
func checkRAIDHealth(g *plumblinev1.GeometrySnapshot) error {
	for i, v := range g.GetInventory().GetVolumes() {
		for j, l := range v.GetLayers() {
			h := l.GetRaidHealth()
			if h == nil {
				continue
			}
			where := fmt.Sprintf("inventory.volumes[%d].layers[%d] (%s) raid_health", i, j, truncateUTF8(l.GetDevice(), 64))
			if vocab.LayerKind(l.GetKind()) != vocab.LayerRAID {
				return fmt.Errorf("%s: on a %q layer: want a raid layer", where, truncateUTF8(l.GetKind(), 64))
			}
			if err := checkRAIDArray(h, raidRoles(l)); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
		}
	}
	return nil
}

// raidRoles is the most roles (slots) the layer's array has: raid_disks,
// or the count before a reshape when that is larger; 0 when unknown.
func raidRoles(l *plumblinev1.Layer) uint32 {
	return max(l.GetRaidDisks(), l.GetReshape().GetPreviousRaidDisks())
}

func checkRAIDArray(h *plumblinev1.RaidHealth, roles uint32) error {
	for _, w := range [...][2]string{{"array_state", h.GetArrayState()}, {"sync_action", h.GetSyncAction()}, {"last_sync_action", h.GetLastSyncAction()}} {
		if w[1] == "" {
			continue
		}
		if err := vocab.CheckMDWord(w[1]); err != nil {
			return fmt.Errorf("%s: %w", w[0], err)
		}
	}
	if h.Degraded != nil && roles != 0 && h.GetDegraded() > roles {
		return fmt.Errorf("degraded %d of %d raid_disks", h.GetDegraded(), roles)
	}
	done, total := h.GetSyncCompletedSectors(), h.GetSyncTotalSectors()
	if done > total {
		return fmt.Errorf("sync_completed_sectors %d above sync_total_sectors %d", done, total)
	}
	if h.GetSyncDelayed() && total != 0 {
		return fmt.Errorf("sync_delayed with %d of %d sectors done: a delayed action reports no progress", done, total)
	}
	if n := len(h.GetMembers()); n > maxRAIDMembers {
		return fmt.Errorf("%d members: want at most %d", n, maxRAIDMembers)
	}
	seen := make(map[string]bool, len(h.GetMembers()))
	for k, m := range h.GetMembers() {
		if m.GetDevice() == "" || len(m.GetDevice()) > 255 || seen[m.GetDevice()] {
			return fmt.Errorf("members[%d]: device %q: want a unique name of 1 to 255 bytes", k, truncateUTF8(m.GetDevice(), 64))
		}
		seen[m.GetDevice()] = true
		if err := checkRAIDMember(m, roles); err != nil {
			return fmt.Errorf("members[%d] (%s): %w", k, m.GetDevice(), err)
		}
	}
	return nil
}

func checkRAIDMember(m *plumblinev1.RaidMember, roles uint32) error {
	if n := len(m.GetState()); n > vocab.MaxMDMemberFlags {
		return fmt.Errorf("%d state flags: want at most %d", n, vocab.MaxMDMemberFlags)
	}
	flags := make(map[string]bool, len(m.GetState()))
	for _, w := range m.GetState() {
		if err := vocab.CheckMDWord(w); err != nil {
			return fmt.Errorf("state: %w", err)
		}
		if flags[w] {
			return fmt.Errorf("state: %q twice", w)
		}
		flags[w] = true
	}
	if m.Slot != nil && roles != 0 && m.GetSlot() >= roles {
		return fmt.Errorf("slot %d of an array of %d raid_disks", m.GetSlot(), roles)
	}
	if m.GetBadBlocks() > maxBadBlockRanges {
		return fmt.Errorf("%d bad-block ranges: want at most %d", m.GetBadBlocks(), maxBadBlockRanges)
	}
	if uint64(m.GetBadBlocks()) > m.GetBadBlockSectors() {
		return fmt.Errorf("%d bad-block ranges over %d sectors: each covers one sector or more", m.GetBadBlocks(), m.GetBadBlockSectors())
	}
	return nil
}
