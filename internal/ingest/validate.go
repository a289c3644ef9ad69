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

	"github.com/plumbline/plumbline/internal/store"
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
	default:
		return store.Record{}, errors.New("no payload: want geometry or probe")
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
