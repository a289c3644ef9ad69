package inventory

import (
	"context"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
)

// TestVolumeDetailShowsFailure: a probe run that never ran shows in the
// volume's detail with its reason and the agent's message.
func TestVolumeDetailShowsFailure(t *testing.T) {
	t.Parallel()
	st := openStore(t, engines[0].DSN(t))
	seedFleet(t, st, 1, 1)
	_, err := st.AppendBatch(context.Background(), "agent00", []store.Record{{
		Sequence: 3, Kind: store.KindProbe, ProducedAt: time.Now(), Payload: []byte{},
		Probe: &store.ProbeResult{MountPoint: "/data0", Device: "sdb", Kind: "log-write", BlockSizeBytes: 8192, QueueDepth: 1,
			StartedAt: time.Now().Add(-time.Minute), Skipped: true, StoppedReason: "refused", Failure: "not enough free space in /data0"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveSyncing(t, st, Options{Tokens: []Token{{Name: "test", Secret: "tok"}}, SyncPeriod: 0})
	defer srv.Close()
	_, body := get(t, srv.URL+"/api/v1/volumes?mount_point=/data0", "Authorization", "Bearer tok")
	id := body["volumes"].([]any)[0].(map[string]any)["id"].(string)
	_, detail := get(t, srv.URL+"/api/v1/volumes/"+id, "Authorization", "Bearer tok")
	probes, _ := detail["probes"].([]any)
	for _, p := range probes {
		m := p.(map[string]any)
		if m["kind"] == "log-write" {
			if m["stopped_reason"] != "refused" || m["failure"] != "not enough free space in /data0" {
				t.Errorf("log-write probe = %v, want stopped_reason refused and the agent's message", m)
			}
			return
		}
	}
	t.Errorf("volume detail has no log-write probe: %v", detail)
}
