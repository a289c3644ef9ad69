package vocab

import (
	"slices"
	"testing"
)

// Every layer kind, source and trigger is listed once and says what it is.
func TestLayerWords(t *testing.T) {
	t.Parallel()
	lists := map[string]struct {
		names []string
		doc   func(string) string
	}{
		"layer kind": {LayerKindNames(), func(s string) string { return LayerKindDoc(LayerKind(s)) }},
		"source":     {SourceNames(), func(s string) string { return SourceDoc(Source(s)) }},
		"trigger":    {TriggerNames(), func(s string) string { return TriggerDoc(Trigger(s)) }},
	}
	for what, l := range lists {
		if len(l.names) == 0 {
			t.Errorf("no %s", what)
		}
		for i, n := range l.names {
			if slices.Index(l.names, n) != i {
				t.Errorf("%s %q listed twice", what, n)
			}
			if l.doc(n) == "" {
				t.Errorf("%s %q has no doc", what, n)
			}
		}
		if l.doc("no-such-word") != "" {
			t.Errorf("%s doc of an unknown word is not empty", what)
		}
	}
	if got, want := LayerKindNames(), []string{"filesystem", "lvm", "dm", "raid", "partition", "disk"}; !slices.Equal(got, want) {
		t.Errorf("LayerKindNames() = %v, want %v (the wire's words, top of the stack first)", got, want)
	}
	if got, want := TriggerNames(), []string{"start", "changed", "interval", "resync"}; !slices.Equal(got, want) {
		t.Errorf("TriggerNames() = %v, want %v", got, want)
	}
	for _, tr := range Triggers() {
		if want := tr == TriggerStart || tr == TriggerResync; tr.AlwaysSent() != want {
			t.Errorf("%s.AlwaysSent() = %v, want %v", tr, tr.AlwaysSent(), want)
		}
	}
	if Trigger("no-such").AlwaysSent() {
		t.Error("an unknown trigger is always sent")
	}
}

// A probe kind's entry says what it does: reads or writes, in which
// order, synced or not, latency or geometry.
func TestProbeKindShapes(t *testing.T) {
	t.Parallel()
	want := map[ProbeKind]struct {
		writes, synced, geometry bool
		access                   Access
	}{
		RandomRead:  {false, false, false, AccessRandom},
		RandomWrite: {true, false, false, AccessRandom},
		LogWrite:    {true, true, false, AccessSequential},
		StripeScan:  {false, false, true, AccessPlaced},
	}
	for _, k := range ListedProbeKinds() {
		s, w := k.Spec(), want[k]
		if s.Writes != w.writes || s.Synced != w.synced || s.Geometry != w.geometry || s.Access != w.access {
			t.Errorf("%s: writes %v, synced %v, geometry %v, access %q; want %v, %v, %v, %q",
				k, s.Writes, s.Synced, s.Geometry, s.Access, w.writes, w.synced, w.geometry, w.access)
		}
		// The properties agree with each other: a synced kind writes; a
		// geometry kind places its reads and is not judged.
		if s.Synced && !s.Writes || s.Geometry != (s.Access == AccessPlaced) || s.Geometry && s.Judged {
			t.Errorf("%s: inconsistent spec %+v", k, s)
		}
	}
	if s := ProbeKind("no-such-kind").Spec(); s != (ProbeKindSpec{}) {
		t.Errorf("Spec of an unknown kind = %+v, want the zero spec", s)
	}
}
