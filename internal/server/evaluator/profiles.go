package evaluator

import (
	"context"

	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
)

// A volume's profile (what its cohort and its prior are) is the one its
// judged record names: the server judges a volume once, at ingest, and
// the evaluator reads that judgement (store.ListJudgedProfiles), never the
// volume's geometry.

// profileAt is a volume's judged profile as last read.
type profileAt struct {
	row     store.JudgedProfile
	profile baseline.Profile
	ok      bool // the judged profile parsed
}

// refreshProfiles reads the profile every present volume was judged with
// (its judged record: the evaluator never judges a geometry itself).
func (e *Evaluator) refreshProfiles(ctx context.Context) error {
	rows, err := e.st.ListJudgedProfiles(ctx)
	if err != nil {
		return err
	}
	seen := make(map[volKey]bool, len(rows))
	for _, r := range rows {
		k := volKey{r.AgentID, r.MountPoint}
		seen[k] = true
		if p, ok := e.profiles[k]; ok && p.row == r {
			continue
		}
		// A key that does not parse (a damaged record): no profile, as
		// for a geometry that did not decode.
		prof, err := baseline.JudgedProfile(r.Profile, r.SplitFraction, r.GranularitySplit)
		e.profiles[k] = profileAt{row: r, profile: prof, ok: err == nil}
	}
	for k := range e.profiles {
		if !seen[k] {
			delete(e.profiles, k)
		}
	}
	return nil
}

type cohortKey struct{ profile, kind string }

// cohorts summarises, per profile and kind, the medians of every present
// volume whose history is trusted.
func (e *Evaluator) cohorts() map[cohortKey]baseline.Stats {
	medians := map[cohortKey][]float64{}
	for k, en := range e.entries {
		p, ok := e.profiles[k.volKey]
		if !ok || !p.ok || !en.det.Trusted() {
			continue
		}
		ck := cohortKey{p.profile.Key(), k.kind}
		medians[ck] = append(medians[ck], en.det.History().Median)
	}
	out := make(map[cohortKey]baseline.Stats, len(medians))
	for ck, m := range medians {
		out[ck] = baseline.CohortOf(m)
	}
	return out
}
