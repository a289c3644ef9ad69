package attribution

import (
	"fmt"
	"strings"

	"github.com/plumbline/plumbline/internal/vocab"
)

// demand is the database's demand on the volume in its last interval
// against its history: each operation its sessions wait for (reads, the
// commit's log writes and syncs, extends: vocab.DatabaseOpWaited) at its
// rate weighted by its usual latency (the history's median), i.e. the I/O
// time its operations would have cost at their usual speed, over the same
// at their history's rates. The database's background flushing (data
// writes, writebacks, fsyncs) is left out: its rate follows checkpoints —
// PostgreSQL 17's writebacks doubled under a token bucket that cut its
// reads and commits to a tenth.
//
// Weighting by usual latency makes the operations that wait on the
// device count (reads, syncs, writebacks) and the ones the page cache
// absorbs (PostgreSQL's buffered writes at 0.01 ms, whose rate swings ×2
// with every checkpoint) nearly not, without a list of operation names
// per engine or a latency floor that would also drop an NVMe device's
// reads.
//
// The ratio is the witness the probe lacks when it cannot run (its busy
// guard skips it on a saturated device) or when it runs behind the same
// queue (a token bucket the workload fills slows the probe's operations
// too): load raises it (more work asked), a throughput ceiling cuts it
// (less work delivered while every operation waits longer), a slower
// device leaves it about steady (the same work, each operation longer).
type demand struct {
	known      bool
	ratio      float64
	now, usual float64 // weighted work per second (seconds of I/O per second)
	ops        []string
}

func demandOf(ops []Op) demand {
	var d demand
	for _, o := range ops {
		if o.HistoryRate <= 0 || o.HistoryMedian <= 0 || !vocab.DatabaseOpWaited(vocab.DatabaseOp(o.Op)) {
			continue
		}
		d.now += o.Rate * o.HistoryMedian
		d.usual += o.HistoryRate * o.HistoryMedian
		d.ops = append(d.ops, fmt.Sprintf("%s %.3g/s vs %.3g/s", o.Op, o.Rate, o.HistoryRate))
	}
	if d.usual <= 0 {
		return demand{}
	}
	d.known, d.ratio = true, d.now/d.usual
	return d
}

// String says the demand with its numbers.
func (d demand) String() string {
	return fmt.Sprintf("×%.2g of its history (%s; weighted by usual latency)", d.ratio, strings.Join(d.ops, ", "))
}
