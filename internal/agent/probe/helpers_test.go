package probe

import (
	"time"

	"github.com/plumbline/plumbline/internal/histogram"
)

func histFrom(ds []time.Duration) *histogram.Histogram {
	h := &histogram.Histogram{}
	for _, d := range ds {
		h.Observe(d)
	}
	return h
}
