package baseline

import (
	"testing"
	"time"
)

func TestRebuildString(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		r    Rebuild
		want string
	}{
		{Rebuild{Device: "md0", Action: "recover", DoneSectors: 43, TotalSectors: 100, SpeedBytesPerSecond: 0},
			"rebuilding, 43% done: md0 recover; its probe runs are kept out of the volume's history"},
		// 57% of 500 GiB left at 100 MiB/s: 2918 s.
		{Rebuild{Device: "md127", Action: "resync", DoneSectors: 430 << 20, TotalSectors: 1000 << 20, SpeedBytesPerSecond: 100 << 20, Since: since},
			"rebuilding, 43% done: md127 resync at 100.0 MiB/s, about 49m0s left, since 2026-11-28T03:00:00Z; its probe runs are kept out of the volume's history"},
		// md said delayed: neither progress nor time left.
		{Rebuild{Device: "md1", Action: "reshape"}, "rebuilding: md1 reshape; its probe runs are kept out of the volume's history"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("%+v:\n got %q\nwant %q", tc.r, got, tc.want)
		}
	}
	for _, a := range []string{"resync", "recover", "reshape"} {
		if !IsRebuild(a) {
			t.Errorf("IsRebuild(%q) = false", a)
		}
	}
	for _, a := range []string{"check", "repair", "idle", "frozen", ""} {
		if IsRebuild(a) {
			t.Errorf("IsRebuild(%q) = true", a)
		}
	}
}
