package main

import "time"

// Config is fleetsim's configuration (its flags).
type Config struct {
	DevDir  string // DIR/dev of a `server --dev --data-dir DIR`
	Address string // overrides the address in DIR/dev/agent.yaml

	Agents       int
	Duration     time.Duration
	Rate         float64 // records/s, whole fleet
	RatePerAgent float64 // records/s per agent; overrides Rate when > 0
	// ReportInterval overrides the interval the server announces in Hello.
	ReportInterval time.Duration
	MaxBatch       int // at most the server's max_batch_records; 0: the server's
	// ConnectConcurrency bounds the Hellos in flight during the connect
	// phase; ConnectTimeout bounds the phase.
	ConnectConcurrency int
	ConnectTimeout     time.Duration
	// Drain bounds the final flush after Duration.
	Drain time.Duration
	// Reconnect: stop as soon as every agent has reported again after the
	// first failure (a server restart), and print how long that took.
	Reconnect bool
	// MaintenanceEvery: every Nth probe run of each agent is reported as
	// skipped by a maintenance window (stop reason maintenance); 0: none.
	MaintenanceEvery int
	// ScanEvery: every Nth probe run of an agent with hardware RAID
	// volumes whose stripe is hidden (VolumeProfile.HiddenStripe) is a
	// stripe-scan of one of them, the first run included; 0: none.
	ScanEvery int

	BackoffBase, BackoffMax time.Duration
	IDPrefix                string
	Seed                    uint64
	Progress                time.Duration // progress lines on stderr; 0: none
}

func (c Config) perAgentRate() float64 {
	if c.RatePerAgent > 0 {
		return c.RatePerAgent
	}
	return c.Rate / float64(c.Agents)
}
