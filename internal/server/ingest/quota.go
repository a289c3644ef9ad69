package ingest

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/plumbline/plumbline/internal/server/store"
)

// Quota bounds what one agent identity may send and store. A zero field
// is its default; a negative one turns its bound off.
type Quota struct {
	// MaxBytesPerDay bounds what the agent's stored records cost per UTC
	// day (store.RecordCost: the record, its rejection reason and a row's
	// overhead). Default DefaultMaxBytesPerDay.
	MaxBytesPerDay int64
	// RecordsPerSecond and RecordBurst are the agent's token bucket of
	// records (every record of a Report counts, replays too). Defaults
	// DefaultRecordsPerSecond and DefaultRecordBurst; the burst is at
	// least Limits.MaxBatchRecords, so that any valid batch can pass.
	RecordsPerSecond float64
	RecordBurst      int
}

// Quota defaults: far above what an agent probing every volume every
// minute stores (a few MiB a day), far below what one flooding does.
const (
	DefaultMaxBytesPerDay   = 512 << 20
	DefaultRecordsPerSecond = 100
	DefaultRecordBurst      = 10000
)

// Refusal reasons: the ErrorInfo reason of a ResourceExhausted answer
// that a quota refused (domain QuotaDomain).
const (
	QuotaDomain           = "plumbline.io"
	ReasonStorageQuota    = "STORAGE_QUOTA_EXCEEDED"
	ReasonRecordRateQuota = "RECORD_RATE_QUOTA_EXCEEDED"
)

func (q Quota) withDefaults(lim Limits) Quota {
	if q.MaxBytesPerDay == 0 {
		q.MaxBytesPerDay = DefaultMaxBytesPerDay
	}
	if q.RecordsPerSecond == 0 {
		q.RecordsPerSecond = DefaultRecordsPerSecond
	}
	if q.RecordBurst <= 0 {
		q.RecordBurst = DefaultRecordBurst
	}
	q.RecordBurst = max(q.RecordBurst, lim.withDefaults().MaxBatchRecords)
	return q
}

// storeQuota is the store's part of q.
func (q Quota) storeQuota() store.Quota {
	return store.Quota{MaxBytesPerDay: max(q.MaxBytesPerDay, 0)}
}

// checkRecordRate takes n records from the agent's bucket, or refuses the
// call (counted for the agent) with the time until they would fit.
func (s *Service) checkRecordRate(ctx context.Context, agent string, n int) error {
	if s.records == nil || n == 0 {
		return nil
	}
	ok, wait := s.records.allowN(agent, n)
	if ok {
		return nil
	}
	s.countQuotaRefusal(ctx, agent)
	return quotaError(ReasonRecordRateQuota, wait, fmt.Sprintf(
		"agent %q: record-rate quota of %g records/s (burst %d) exceeded by a batch of %d; the records stay in the agent's spool: retry in %s",
		agent, s.opts.Quota.RecordsPerSecond, s.opts.Quota.RecordBurst, n, wait.Round(time.Millisecond)))
}

// storageQuotaError is the refusal of a batch of n records over the
// agent's storage quota (logged once per episode of refusals of the agent,
// as identity conflicts are): retry at the next UTC day.
func (s *Service) storageQuotaError(agent string, n int) error {
	now := s.opts.Now()
	if s.conflictLog.begins("quota\x00"+agent, now) {
		s.opts.Logger.Warn("storage quota: batch refused (logged again after 10 minutes without a refusal)", "agent", agent, "records", n, "max_bytes_per_day", s.opts.Quota.MaxBytesPerDay)
	}
	wait := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Sub(now)
	return quotaError(ReasonStorageQuota, wait, fmt.Sprintf(
		"agent %q: storage quota of %d bytes per day reached; nothing of this batch was stored and the records stay in the agent's spool: retry after 00:00 UTC (in %s), or raise ingest.quota.max_bytes_per_day",
		agent, s.opts.Quota.MaxBytesPerDay, wait.Round(time.Second)))
}

func (s *Service) countQuotaRefusal(ctx context.Context, agent string) {
	if err := s.store.CountQuotaRefusal(ctx, agent); err != nil {
		s.opts.Logger.Warn("quota: counting a refusal", "agent", agent, "err", err)
	}
}

// quotaError is ResourceExhausted with the reason (ErrorInfo) and when to
// retry (RetryInfo).
func quotaError(reason string, retry time.Duration, msg string) error {
	st, err := status.New(codes.ResourceExhausted, msg).WithDetails(
		&errdetails.ErrorInfo{Reason: reason, Domain: QuotaDomain},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)},
	)
	if err != nil {
		return status.Error(codes.ResourceExhausted, msg)
	}
	return st.Err()
}

// allowN takes n tokens from key's bucket now, or reports how long until
// they would be there (taking none).
func (l *limiters) allowN(key string, n int) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.bucket(key, now).ReserveN(now, n)
	if !r.OK() {
		return false, time.Duration(float64(n) / float64(l.r) * float64(time.Second))
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}
