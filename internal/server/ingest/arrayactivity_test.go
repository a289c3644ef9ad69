package ingest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func recovering() *plumblinev1.ArrayActivity {
	return &plumblinev1.ArrayActivity{Device: "md0", SyncAction: "recover", SyncCompletedSectors: 430, SyncTotalSectors: 1000, SyncSpeedBytesPerSecond: 50 << 20}
}

func TestCheckArrayActivity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		acts []*plumblinev1.ArrayActivity
		want string // "" accepted
	}{
		{"none", nil, ""},
		{"recover", []*plumblinev1.ArrayActivity{recovering()}, ""},
		{"check beside a reshape", []*plumblinev1.ArrayActivity{recovering(), {Device: "md1", SyncAction: "check"}}, ""},
		{"an action this version does not know", []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "scrub-deep"}}, ""},
		{"idle", []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "idle"}}, "want an action that runs"},
		{"frozen", []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "frozen"}}, "want an action that runs"},
		{"no action", []*plumblinev1.ArrayActivity{{Device: "md0"}}, "sync_action"},
		{"upper case", []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "Resync"}}, "sync_action"},
		{"not md", []*plumblinev1.ArrayActivity{{Device: "sdb", SyncAction: "resync"}}, "md array's kernel name"},
		{"a path", []*plumblinev1.ArrayActivity{{Device: "md0/../sda", SyncAction: "resync"}}, "md array's kernel name"},
		{"twice", []*plumblinev1.ArrayActivity{recovering(), recovering()}, "each once"},
		{"done beyond total", []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "resync", SyncCompletedSectors: 2, SyncTotalSectors: 1}}, "2 sectors done of 1"},
		{"speed", []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "resync", SyncSpeedBytesPerSecond: 1 << 41}}, "sync_speed_bytes_per_second"},
		{"too many", func() (a []*plumblinev1.ArrayActivity) {
			for i := range 17 {
				a = append(a, &plumblinev1.ArrayActivity{Device: fmt.Sprintf("md%d", i), SyncAction: "check"})
			}
			return a
		}(), "17 arrays"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := probeResult()
			p.ArrayActivity = tc.acts
			got, err := convertProbe(p, testNow, Limits{}.withDefaults())
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want %q", err, tc.want)
			case err == nil && len(got.ArrayActivity) != len(tc.acts):
				t.Errorf("stored %d arrays, want %d", len(got.ArrayActivity), len(tc.acts))
			}
		})
	}
}

// A marked run sent over gRPC with mutual TLS is stored with its mark and
// read back by the evaluator's query; a run with a bad mark is refused
// alone; an unmarked run reads back without one.
func TestArrayActivityStored(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{})
		c := e.agent(t, "db1")
		hello(t, c, "db1")
		marked, bad, plain := probeRecord(1), probeRecord(2), probeRecord(3)
		marked.GetProbe().ArrayActivity = []*plumblinev1.ArrayActivity{recovering(), {Device: "md1", SyncAction: "check", SyncTotalSectors: 8}}
		bad.GetProbe().ArrayActivity = []*plumblinev1.ArrayActivity{{Device: "md0", SyncAction: "idle"}}
		rep, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{marked, bad, plain}})
		if err != nil {
			t.Fatalf("Report: %v", err)
		}
		if r := rep.GetRejections(); len(r) != 1 || r[0].GetSequence() != 2 || !strings.Contains(r[0].GetReason(), "array_activity") {
			t.Fatalf("rejections = %v, want sequence 2's mark alone", r)
		}
		runs, err := e.store.PendingProbeRuns(ctxT(t), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2 {
			t.Fatalf("%d pending runs, want 2", len(runs))
		}
		want := []store.ArrayActivity{
			{Device: "md0", Action: "recover", DoneSectors: 430, TotalSectors: 1000, SpeedBytesPerSecond: 50 << 20},
			{Device: "md1", Action: "check", TotalSectors: 8},
		}
		if !reflect.DeepEqual(runs[0].ArrayActivity, want) {
			t.Errorf("marked run read back %+v, want %+v", runs[0].ArrayActivity, want)
		}
		if runs[1].ArrayActivity != nil {
			t.Errorf("plain run read back %+v, want no mark", runs[1].ArrayActivity)
		}
	})
}
