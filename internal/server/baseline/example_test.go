package baseline_test

import (
	"fmt"
	"time"

	"github.com/plumbline/plumbline/internal/server/baseline"
)

// A volume's log writes step from 1 ms to 3 ms: four runs later it is
// degraded against its own history, since the first slow run.
func ExampleDetector() {
	d, err := baseline.NewDetector(baseline.Config{}) // defaults
	if err != nil {
		panic(err)
	}
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	var s baseline.State
	for i := range 64 {
		latency := 1e-3 * (1 + 0.02*float64(i%5)) // 1.00–1.08 ms
		if i >= 60 {
			latency = 3e-3
		}
		s = d.Observe(start.Add(time.Duration(i)*time.Hour), latency, baseline.Refs{})
	}
	fmt.Println(s.Status, s.Reference, fmt.Sprintf("%.2f", s.Ratio), s.Since.Format(time.DateTime))
	// Output: degraded history 2.88 2026-01-07 12:00:00
}
