package exporter

import (
	"context"

	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// The database series of a volume — its latency, rate, not-measured and
// regression gauges by source and op — are part of the volume's baseline
// part: the evaluator's passes write them, and the pass reads carry them.

// dbReads are the database judge's rows, by volume.
type dbReads struct {
	states  map[volKey][]store.DatabaseState
	volumes map[volKey]store.DatabaseVolume
}

// dbFacts are one volume's database rows.
type dbFacts struct {
	states []store.DatabaseState
	volume store.DatabaseVolume
}

func (r dbReads) of(k volKey) dbFacts {
	return dbFacts{states: r.states[k], volume: r.volumes[k]}
}

// readDatabases reads every volume's database states (without their
// detectors: the exporter has no use for them).
func (c *Collector) readDatabases(ctx context.Context) (dbReads, error) {
	states, err := c.st.ListDatabaseStates(ctx)
	if err != nil {
		return dbReads{}, err
	}
	vols, err := c.st.ListDatabaseVolumes(ctx)
	if err != nil {
		return dbReads{}, err
	}
	for i := range states {
		states[i].Detector = nil
	}
	r := dbReads{states: groupMap(states, func(d *store.DatabaseState) volKey { return volKey{d.AgentID, d.MountPoint} }),
		volumes: make(map[volKey]store.DatabaseVolume, len(vols))}
	for _, v := range vols {
		r.volumes[volKey{v.AgentID, v.MountPoint}] = v
	}
	return r, nil
}

func (f dbFacts) equal(g dbFacts) bool {
	if f.volume != g.volume || len(f.states) != len(g.states) {
		return false
	}
	for i, a := range f.states {
		b := g.states[i]
		if a.Source != b.Source || a.Op != b.Op || a.Status != b.Status || a.Latency != b.Latency || a.OpsRate != b.OpsRate || a.Ratio != b.Ratio {
			return false
		}
	}
	return true
}

// appendDatabase appends a volume's database series: per source and op its
// rate, and its latency or, when the database does not time it, the
// not-measured gauge; while degraded, the regression ratio with the
// volume's attribution.
func (c *Collector) appendDatabase(ss []*series, agent, host, mount string, f dbFacts) []*series {
	for _, d := range f.states {
		ss = append(ss, c.series(famDBRate, d.OpsRate, agent, host, mount, d.Source, d.Op))
		switch {
		case d.Status == vocab.DatabaseNotMeasured:
			ss = append(ss, c.series(famDBNotMeasured, 1, agent, host, mount, d.Source, d.Op))
		case d.Latency > 0:
			ss = append(ss, c.series(famDBLatency, d.Latency, agent, host, mount, d.Source, d.Op))
		}
		if d.Status == string(baseline.Degraded) && d.Ratio > 0 {
			attr := f.volume.Attribution
			if attr == "" {
				attr = string(vocab.AttributionUndetermined)
			}
			ss = append(ss, c.series(famDBRegression, d.Ratio, agent, host, mount, d.Source, d.Op, attr))
		}
	}
	return ss
}
