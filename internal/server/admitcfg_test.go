package server

import (
	"log/slog"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/ingest"
)

// The admission bounds of the configuration reach the ingest service,
// and a rate of 0 turns its limit off (0 in ingest.Options would be the
// default).
func TestIngestOptionsCarryAdmissionBounds(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.GRPC.MaxAnonymousInflightBytes = 8 << 20
	cfg.GRPC.MessageReadTimeout = 5 * time.Second
	cfg.Enrollment.RenewRateLimitPerAgent = config.RateConfig{CallsPerSecond: 1, Burst: 2}
	cfg.Enrollment.RateLimitPerAddress = config.RateConfig{}
	got := ingest.New(nil, ingestOptions(cfg, slog.New(slog.DiscardHandler), nil)).Options()
	want := map[string][2]any{
		"MaxAnonymousInflightBytes": {got.MaxAnonymousInflightBytes, int64(8 << 20)},
		"MessageReadTimeout":        {got.MessageReadTimeout, 5 * time.Second},
		"RenewRatePerSecond":        {got.RenewRatePerSecond, 1.0},
		"RenewBurst":                {got.RenewBurst, 2},
		"AddressRatePerSecond":      {got.AddressRatePerSecond, -1.0},
	}
	for name, gw := range want {
		if gw[0] != gw[1] {
			t.Errorf("%s = %v, want %v", name, gw[0], gw[1])
		}
	}
}
