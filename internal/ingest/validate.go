package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/probe"
	"github.com/plumbline/plumbline/internal/store"
	"github.com/plumbline/plumbline/internal/wire"
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
	if l.MaxBatchRecords <= 0 {
		l.MaxBatchRecords = d.MaxBatchRecords
	}
	if l.MaxVolumes <= 0 {
		l.MaxVolumes = d.MaxVolumes
	}
	if l.MaxLayers <= 0 {
		l.MaxLayers = d.MaxLayers
	}
	if l.MaxStringBytes <= 0 {
		l.MaxStringBytes = d.MaxStringBytes
	}
	if l.MaxListLen <= 0 {
		l.MaxListLen = d.MaxListLen
	}
	if l.MaxClockSkew <= 0 {
		l.MaxClockSkew = d.MaxClockSkew
	}
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
				// The reason and the start of the record, not all of it:
				// a rejected record is kept to settle its sequence and to
				// show what was wrong, and may be as large as a message.
				Payload: slices.Clone(payload[:min(len(payload), MaxRejectedPayloadBytes)]),
				Reason:  reason,
			})
			b.Rejections = append(b.Rejections, &plumblinev1.Rejection{Sequence: r.GetSequence(), Reason: reason})
			continue
		}
		sr.Payload = payload
		b.Records = append(b.Records, sr)
	}
	return b, nil
}

// MaxRejectedPayloadBytes is how much of a rejected record is stored: the
// first bytes of its serialised form (without unknown fields).
const MaxRejectedPayloadBytes = 4 << 10

// MaxReasonBytes bounds a rejection reason (stored, logged and sent back).
const MaxReasonBytes = 1 << 10

// truncateUTF8 cuts s to at most n bytes on a rune boundary, marking the cut.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "… (truncated)"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// discardUnknown drops the unknown fields of m and of every message in it.
func discardUnknown(m protoreflect.Message, depth int) {
	if depth > 64 {
		return // deeper than any Plumbline message; checkGeneric refuses it
	}
	if m.GetUnknown() != nil {
		m.SetUnknown(nil)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				discardUnknown(l.Get(i).Message(), depth+1)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				discardUnknown(mv.Message(), depth+1)
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			discardUnknown(v.Message(), depth+1)
		}
		return true
	})
}

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

// checkGeneric walks a message: every string at most MaxStringBytes, every
// list and map at most MaxListLen (volumes and layers have their own
// limits), every double finite. An error names the field by its path from
// where ("record.probe.latency.buckets[3]: ...").
//
// The path is built only for an error, from the failing field outwards
// (fieldError.at): the walk of a good message, run for every field of
// every record received, builds no strings.
func checkGeneric(m protoreflect.Message, where string, lim Limits, depth int) error {
	if e := checkMessage(m, lim, depth); e != nil {
		return e.error(where)
	}
	return nil
}

// fieldError is a failed check of checkMessage: msg, and the path of the
// field that failed, innermost segment first.
type fieldError struct {
	rpath []string // ".name", "[3]", "[key]"
	msg   string
}

// at adds the next outer segment of the path.
func (e *fieldError) at(seg string) *fieldError {
	e.rpath = append(e.rpath, seg)
	return e
}

func (e *fieldError) error(root string) error {
	var b strings.Builder
	b.WriteString(root)
	for i := len(e.rpath) - 1; i >= 0; i-- {
		b.WriteString(e.rpath[i])
	}
	b.WriteString(": ")
	b.WriteString(e.msg)
	return errors.New(b.String())
}

func fieldErrorf(format string, args ...any) *fieldError {
	return &fieldError{msg: fmt.Sprintf(format, args...)}
}

func checkMessage(m protoreflect.Message, lim Limits, depth int) *fieldError {
	if depth > 16 {
		return &fieldError{msg: "nested too deep"}
	}
	var err *fieldError
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			max := lim.MaxListLen
			switch fd.FullName() {
			case "plumbline.v1.Inventory.volumes":
				max = lim.MaxVolumes
			case "plumbline.v1.Volume.layers":
				max = lim.MaxLayers
			case "plumbline.v1.Histogram.buckets":
				max = wire.MaxBuckets
			}
			if l.Len() > max {
				err = fieldErrorf("%d entries: want at most %d", l.Len(), max)
				break
			}
			for i := 0; i < l.Len() && checked(fd); i++ {
				if err = checkValue(fd, l.Get(i), lim, depth); err != nil {
					err.at("[" + strconv.Itoa(i) + "]")
					break
				}
			}
		case fd.IsMap():
			mp := v.Map()
			if mp.Len() > lim.MaxListLen {
				err = fieldErrorf("%d entries: want at most %d", mp.Len(), lim.MaxListLen)
				break
			}
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if s, ok := k.Interface().(string); ok && len(s) > lim.MaxStringBytes {
					err = fieldErrorf("key of %d bytes: want at most %d", len(s), lim.MaxStringBytes)
					return false
				}
				if err = checkValue(fd.MapValue(), mv, lim, depth); err != nil {
					err.at(fmt.Sprintf("[%v]", k.Interface()))
				}
				return err == nil
			})
		default:
			err = checkValue(fd, v, lim, depth)
		}
		if err != nil {
			err.at("." + string(fd.Name()))
		}
		return err == nil
	})
	return err
}

// checked reports whether checkValue checks anything of a value of fd's
// kind (integers, bools, bytes and enums have nothing to check).
func checked(fd protoreflect.FieldDescriptor) bool {
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.DoubleKind, protoreflect.FloatKind, protoreflect.MessageKind, protoreflect.GroupKind:
		return true
	}
	return false
}

func checkValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, lim Limits, depth int) *fieldError {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if n := len(v.String()); n > lim.MaxStringBytes {
			return fieldErrorf("%d bytes: want at most %d", n, lim.MaxStringBytes)
		}
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fieldErrorf("%v: want a finite number", f)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return checkMessage(v.Message(), lim, depth+1)
	}
	return nil
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

// Geometry enumerations, from geometry.proto.
var (
	triggers   = []string{"start", "changed", "interval", "resync"}
	layerKinds = []string{"filesystem", "lvm", "dm", "raid", "partition", "disk"}
	raidLevels = []string{"raid0", "raid1", "raid5", "raid6", "raid10", "raid50", "raid60", "linear"}
)

func convertGeometry(g *plumblinev1.GeometrySnapshot, lim Limits) ([]store.Volume, error) {
	if !slices.Contains(triggers, g.GetTrigger()) {
		return nil, fmt.Errorf("trigger %q: want one of %s", g.GetTrigger(), strings.Join(triggers, ", "))
	}
	inv := g.GetInventory()
	if inv == nil {
		return nil, errors.New("inventory missing")
	}
	if h := inv.GetHost(); h != nil && h.GetOs() != "" && h.GetOs() != "linux" && h.GetOs() != "windows" {
		return nil, fmt.Errorf("host.os %q: want linux or windows", h.GetOs())
	}
	seen := make(map[string]bool, len(inv.GetVolumes()))
	out := make([]store.Volume, 0, len(inv.GetVolumes()))
	for i, v := range inv.GetVolumes() {
		mp := v.GetMountPoint()
		if err := checkVolume(v, lim); err != nil {
			if mp != "" {
				return nil, fmt.Errorf("volume %q: %w", mp, err)
			}
			return nil, fmt.Errorf("volumes[%d]: %w", i, err)
		}
		if seen[mp] {
			return nil, fmt.Errorf("volume %q listed twice", mp)
		}
		seen[mp] = true
		sv, err := judge(v)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", mp, err)
		}
		out = append(out, sv)
	}
	return out, nil
}

// Rejudge is the store.JudgeFunc of the server's rules: it re-evaluates a
// stored geometry's alignment, so that a rule change reaches volumes whose
// agents send no new snapshot (store.RejudgeVolumes, run at server start).
func Rejudge(geometry []byte) (store.Volume, error) {
	var v plumblinev1.Volume
	if err := proto.Unmarshal(geometry, &v); err != nil {
		return store.Volume{}, fmt.Errorf("stored geometry: %w", err)
	}
	sv, err := judge(&v)
	if err != nil {
		return store.Volume{}, err
	}
	return sv, nil
}

// judge re-evaluates a volume's alignment with the server's rules (the
// authoritative verdict) and converts it for the store.
func judge(v *plumblinev1.Volume) (store.Volume, error) {
	v = proto.Clone(v).(*plumblinev1.Volume)
	a := align.Evaluate(v)
	v.Alignment = a
	geom, err := proto.MarshalOptions{Deterministic: true}.Marshal(v)
	if err != nil {
		return store.Volume{}, err
	}
	sv := store.Volume{
		MountPoint:      v.GetMountPoint(),
		Device:          v.GetDevice(),
		FSType:          v.GetFilesystem().GetType(),
		Geometry:        geom,
		Verdict:         a.GetVerdict(),
		StripeUnitBytes: a.GetStripeUnitBytes(),
	}
	if a.DataOffsetBytes != nil {
		off := a.GetDataOffsetBytes()
		if off > math.MaxInt64 {
			return store.Volume{}, fmt.Errorf("data offset %d: layer offsets add up to more than 2^63-1", off)
		}
		sv.DataOffsetBytes = &off
	}
	if sv.StripeUnitBytes > math.MaxInt64 {
		return store.Volume{}, fmt.Errorf("stripe unit %d: want at most 2^63-1", sv.StripeUnitBytes)
	}
	if f, ok := a.GetSplitFraction()[8<<10]; ok {
		sv.SplitFraction8K = &f
	}
	if f, ok := a.GetSplitFraction()[64<<10]; ok {
		sv.SplitFraction64K = &f
	}
	return sv, nil
}

func checkVolume(v *plumblinev1.Volume, lim Limits) error {
	if err := checkMountPoint(v.GetMountPoint()); err != nil {
		return err
	}
	if fs := v.GetFilesystem(); fs != nil {
		if err := checkBlockSize("filesystem.block_size_bytes", uint64(fs.GetBlockSizeBytes())); err != nil {
			return err
		}
		for _, f := range []struct {
			name string
			v    uint64
		}{{"stripe_unit_bytes", fs.GetStripeUnitBytes()}, {"stripe_width_bytes", fs.GetStripeWidthBytes()}, {"size_bytes", fs.GetSizeBytes()}} {
			if f.v > math.MaxInt64 {
				return fmt.Errorf("filesystem.%s %d: want at most 2^63-1", f.name, f.v)
			}
		}
	}
	var offsets uint64
	for i, l := range v.GetLayers() {
		if err := checkLayer(l); err != nil {
			name := l.GetDevice()
			if name == "" {
				name = l.GetKind()
			}
			return fmt.Errorf("layers[%d] (%s): %w", i, name, err)
		}
		// Every sum of offsets align.Evaluate makes is part of this one.
		var carry uint64
		if offsets, carry = bits.Add64(offsets, l.GetOffsetBytes(), 0); carry != 0 || offsets > math.MaxInt64 {
			return fmt.Errorf("data offset: the offsets of layers[0] to layers[%d] add up to more than 2^63-1 bytes", i)
		}
	}
	return nil
}

func checkLayer(l *plumblinev1.Layer) error {
	if !slices.Contains(layerKinds, l.GetKind()) {
		return fmt.Errorf("kind %q: want one of %s", l.GetKind(), strings.Join(layerKinds, ", "))
	}
	if lv := l.GetRaidLevel(); lv != "" && !slices.Contains(raidLevels, lv) {
		return fmt.Errorf("raid_level %q: want one of %s", lv, strings.Join(raidLevels, ", "))
	}
	for _, f := range []struct {
		name string
		v    uint64
	}{
		{"offset_bytes", l.GetOffsetBytes()}, {"size_bytes", l.GetSizeBytes()},
		{"stripe_unit_bytes", l.GetStripeUnitBytes()}, {"stripe_width_bytes", l.GetStripeWidthBytes()},
	} {
		if f.v > math.MaxInt64 {
			return fmt.Errorf("%s %d: want at most 2^63-1", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    uint32
	}{{"logical_sector_bytes", l.GetLogicalSectorBytes()}, {"physical_sector_bytes", l.GetPhysicalSectorBytes()}} {
		if f.v != 0 && (!powerOfTwo(uint64(f.v)) || f.v < 512 || f.v > 64<<10) {
			return fmt.Errorf("%s %d: want a power of two from 512 to 65536 (or 0: unknown)", f.name, f.v)
		}
	}
	if ls, ps := l.GetLogicalSectorBytes(), l.GetPhysicalSectorBytes(); ls != 0 && ps != 0 && ps < ls {
		return fmt.Errorf("physical_sector_bytes %d below logical_sector_bytes %d", ps, ls)
	}
	if err := checkBlockSize("block_size_bytes", uint64(l.GetBlockSizeBytes())); err != nil {
		return err
	}
	if l.GetRaidDisks() > 4096 || l.GetRaidDataDisks() > l.GetRaidDisks() {
		return fmt.Errorf("raid_disks %d, raid_data_disks %d: want data disks ≤ disks ≤ 4096", l.GetRaidDisks(), l.GetRaidDataDisks())
	}
	if ao := l.AlignmentOffsetBytes; ao != nil && (*ao < -1 || *ao > math.MaxInt32) {
		return fmt.Errorf("alignment_offset_bytes %d: want -1 or 0 to 2^31-1", *ao)
	}
	return nil
}

// checkBlockSize accepts 0 (unknown) or a power of two from 512 B to 1 GiB.
func checkBlockSize(name string, v uint64) error {
	if v != 0 && (!powerOfTwo(v) || v < 512 || v > 1<<30) {
		return fmt.Errorf("%s %d: want a power of two from 512 to 2^30 (or 0: unknown)", name, v)
	}
	return nil
}

func powerOfTwo(v uint64) bool { return v != 0 && bits.OnesCount64(v) == 1 }

// checkMountPoint accepts an absolute, clean POSIX path (/, /var/lib/pgsql)
// or an absolute Windows path (C:\, D:\MSSQL\Data\, \\?\Volume{...}\).
func checkMountPoint(mp string) error {
	if mp == "" {
		return errors.New("mount_point missing")
	}
	if strings.ContainsFunc(mp, func(r rune) bool { return r == 0 || unicode.IsControl(r) }) {
		return fmt.Errorf("mount_point %q: control characters", mp)
	}
	switch {
	case strings.HasPrefix(mp, "/"):
		if path.Clean(mp) != mp {
			return fmt.Errorf("mount_point %q: want a clean absolute path (%q)", mp, path.Clean(mp))
		}
		return nil
	case len(mp) >= 3 && isLetter(mp[0]) && mp[1] == ':' && mp[2] == '\\':
		return nil
	case strings.HasPrefix(mp, `\\?\`) || strings.HasPrefix(mp, `\\.\`):
		return nil
	}
	return fmt.Errorf("mount_point %q: want an absolute path", mp)
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// Probe enumerations, from agent.proto.
var (
	syncModes    = []string{string(probe.SyncDsync), string(probe.SyncFdatasync)}
	stopReasons  = append([]string{""}, probe.StopReasons...)
	maxQueue     = uint32(256)
	probeKindSet = func() []string {
		out := make([]string, len(probe.Kinds))
		for i, k := range probe.Kinds {
			out[i] = string(k)
		}
		return out
	}()
)

func convertProbe(p *plumblinev1.ProbeResult, now time.Time, lim Limits) (*store.ProbeResult, error) {
	if err := checkMountPoint(p.GetMountPoint()); err != nil {
		return nil, err
	}
	if d := p.GetDevice(); strings.ContainsFunc(d, func(r rune) bool { return r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return nil, fmt.Errorf("device %q: want a kernel device name (sdb, dm-3, md0)", d)
	}
	kind := p.GetKind()
	if !slices.Contains(probeKindSet, kind) {
		return nil, fmt.Errorf("kind %q: want one of %s", kind, strings.Join(probeKindSet, ", "))
	}
	logWrite := kind == string(probe.LogWrite)
	bs := uint64(p.GetBlockSizeBytes())
	maxBS := uint64(probe.MaxBlockSize)
	if logWrite {
		maxBS = probe.MaxLogBlockSize
	}
	if !powerOfTwo(bs) || bs < probe.MinBlockSize || bs > maxBS {
		return nil, fmt.Errorf("block_size_bytes %d: want a power of two from %d to %d for %s", bs, probe.MinBlockSize, maxBS, kind)
	}
	qd := p.GetQueueDepth()
	switch {
	case logWrite && qd != 1:
		return nil, fmt.Errorf("queue_depth %d: want 1 for log-write", qd)
	case qd < 1 || qd > maxQueue:
		return nil, fmt.Errorf("queue_depth %d: want 1 to %d", qd, maxQueue)
	}
	switch s := p.GetSync(); {
	case logWrite && !slices.Contains(syncModes, s):
		return nil, fmt.Errorf("sync %q: want one of %s for log-write", s, strings.Join(syncModes, ", "))
	case !logWrite && s != "":
		return nil, fmt.Errorf("sync %q: want empty for %s", s, kind)
	}
	if !slices.Contains(stopReasons, p.GetStoppedReason()) {
		return nil, fmt.Errorf("stopped_reason %q: want empty or one of %s", p.GetStoppedReason(), strings.Join(stopReasons[1:], ", "))
	}
	ops, errs := p.GetOps(), p.GetErrors()
	if ops > probe.MaxOps || errs > probe.MaxOps {
		return nil, fmt.Errorf("ops %d, errors %d: want at most %d each", ops, errs, probe.MaxOps)
	}
	if b := p.GetBytes(); b > ops*bs {
		return nil, fmt.Errorf("bytes %d: more than ops × block_size_bytes (%d × %d)", b, ops, bs)
	}
	if p.GetSkipped() && ops != 0 {
		return nil, fmt.Errorf("skipped with ops %d: a skipped run has no operations", ops)
	}
	notRun := slices.Contains(probe.NotRunReasons, p.GetStoppedReason())
	if notRun && (!p.GetSkipped() || ops != 0 || errs != 0) {
		return nil, fmt.Errorf("stopped_reason %s with ops %d, errors %d, skipped %v: a run that never started has no operations and is skipped", p.GetStoppedReason(), ops, errs, p.GetSkipped())
	}
	failure := p.GetFailure()
	switch {
	case failure != "" && !notRun:
		return nil, fmt.Errorf("failure set with stopped_reason %q: want it only with %s", p.GetStoppedReason(), strings.Join(probe.NotRunReasons, ", "))
	case len(failure) > probe.MaxFailureBytes:
		return nil, fmt.Errorf("failure: %d bytes, want at most %d", len(failure), probe.MaxFailureBytes)
	case !utf8.ValidString(failure) || strings.ContainsFunc(failure, unicode.IsControl):
		return nil, fmt.Errorf("failure %q: want UTF-8 text without control characters", failure)
	}
	var dur time.Duration
	if d := p.GetDuration(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, fmt.Errorf("duration: %w", err)
		}
		dur = d.AsDuration()
		if dur < 0 || dur > maxProbeDuration {
			return nil, fmt.Errorf("duration %s: want 0 to %s", dur, maxProbeDuration)
		}
	}
	started, err := checkTime(p.GetStartedAt(), "started_at", now, lim)
	if err != nil {
		return nil, err
	}
	hist, err := wire.HistogramFromProto(p.GetLatency())
	if err != nil {
		return nil, fmt.Errorf("latency: %w", err)
	}
	if hist.Count() != ops {
		return nil, fmt.Errorf("latency: %d observations for %d ops: want one per completed op", hist.Count(), ops)
	}
	// No op outlasts the longest run, and no more than queue_depth ops
	// are ever in flight: that bounds the sum of a run's latencies, so
	// the server's merged histograms stay far from overflowing.
	if mx := hist.Max(); mx > maxProbeDuration {
		return nil, fmt.Errorf("latency: max %s: want at most %s", mx, maxProbeDuration)
	}
	if hi, lo := bits.Mul64(uint64(qd), uint64(maxProbeDuration)); hi != 0 || uint64(hist.Sum()) > lo {
		return nil, fmt.Errorf("latency: sum %s: more than queue_depth %d × %s", hist.Sum(), qd, maxProbeDuration)
	}
	if c := p.GetIopsCap(); c < 0 {
		return nil, fmt.Errorf("iops_cap %v: want 0 (uncapped) or more", c)
	}
	if bp := p.GetBusyPercent(); bp < 0 || bp > 100 {
		return nil, fmt.Errorf("busy_percent %v: want 0 to 100", bp)
	}
	if g := p.GetBusyGuard(); g != "" && g != "on" && g != "off" && !strings.HasPrefix(g, "unavailable") {
		return nil, fmt.Errorf("busy_guard %q: want on, off or \"unavailable: why\"", g)
	}
	histBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(p.GetLatency())
	if err != nil {
		return nil, fmt.Errorf("latency: %w", err)
	}
	return &store.ProbeResult{
		MountPoint:     p.GetMountPoint(),
		Device:         p.GetDevice(),
		Kind:           kind,
		BlockSizeBytes: uint32(bs),
		QueueDepth:     qd,
		StartedAt:      started,
		Duration:       dur,
		Ops:            ops,
		Errors:         errs,
		Bytes:          p.GetBytes(),
		Skipped:        p.GetSkipped(),
		StoppedReason:  p.GetStoppedReason(),
		Failure:        failure,
		Histogram:      histBytes,
	}, nil
}
