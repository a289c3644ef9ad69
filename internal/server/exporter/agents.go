package exporter

import "time"

// The agent and pipeline series: each agent's last report and whether it
// is up, its client certificate's validity, identity conflicts, records stored by kind, the evaluator's
// counters. All fleet-wide: shard 0 carries them.

// buildEvaluator sets the evaluator's families and returns its status
// (zero without an evaluator).
func (c *Collector) buildEvaluator() EvaluatorStatus {
	var ev EvaluatorStatus
	var last, runs, failures []*series
	if f := c.opts.Evaluator; f != nil {
		ev = f()
		if !ev.LastSuccess.IsZero() {
			last = append(last, c.series(famEvalLast, seconds(ev.LastSuccess)))
		}
		runs = append(runs, c.series(famEvalRuns, float64(ev.Runs)))
		failures = append(failures, c.series(famEvalFailures, float64(ev.Failures)))
	}
	c.set(famEvalLast, last)
	c.set(famEvalRuns, runs)
	c.set(famEvalFailures, failures)
	return ev
}

func (c *Collector) buildAgents(now time.Time) {
	last := make([]*series, 0, len(c.hosts))
	up := make([]*series, 0, len(c.hosts))
	var conflicts, certExpiry, certIssued, refusals, rejected, storedToday []*series
	for _, a := range c.hosts {
		if a.QuotaRefusals > 0 {
			refusals = append(refusals, c.series(famAgentQuotaRefusals, float64(a.QuotaRefusals), a.ID, a.Hostname))
		}
		if a.RecordsRejected > 0 {
			rejected = append(rejected, c.series(famAgentRecordsRejected, float64(a.RecordsRejected), a.ID, a.Hostname))
		}
		if b := a.StoredBytesOn(now); b > 0 {
			storedToday = append(storedToday, c.series(famAgentStoredToday, float64(b), a.ID, a.Hostname))
		}
		if !a.CertNotAfter.IsZero() {
			certExpiry = append(certExpiry, c.series(famAgentCertExpiry, seconds(a.CertNotAfter), a.ID, a.Hostname))
			certIssued = append(certIssued, c.series(famAgentCertIssued, seconds(a.CertNotBefore), a.ID, a.Hostname))
		}
		if a.IdentityConflicts > 0 {
			conflicts = append(conflicts, c.series(famAgentConflicts, float64(a.IdentityConflicts), a.ID, a.Hostname))
		}
		v := 0.0 // up: connected to a replica or reported within the threshold
		if alive := a.Alive(); !alive.IsZero() && now.Sub(alive) <= c.opts.AgentStaleAfter {
			v = 1
		}
		last = append(last, c.series(famAgentLast, seconds(a.LastSeen), a.ID, a.Hostname))
		up = append(up, c.series(famAgentUp, v, a.ID, a.Hostname))
	}
	c.set(famAgentCertExpiry, certExpiry)
	c.set(famAgentCertIssued, certIssued)
	c.set(famAgentConflicts, conflicts)
	c.set(famAgentLast, last)
	c.set(famAgentQuotaRefusals, refusals)
	c.set(famAgentRecordsRejected, rejected)
	c.set(famAgentStoredToday, storedToday)
	c.set(famAgentUp, up)
	ingest := make([]*series, 0, len(c.counts))
	for kind, n := range c.counts { // every record kind, counted or 0 (store.RecordCounts)
		ingest = append(ingest, c.series(famIngestRecords, float64(n), string(kind)))
	}
	c.set(famIngestRecords, ingest)
}
