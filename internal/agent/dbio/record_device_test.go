package dbio

import (
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// The geometry names a volume's device as the mount table does
// (/dev/loop0p1, /dev/mapper/vg-data); the wire, like a probe run, names
// the kernel's device: the server rejects a record with a path there.
func TestRecordDeviceKernelName(t *testing.T) {
	t.Parallel()
	m := Mounts{Volumes: []*plumblinev1.Volume{{MountPoint: "/", Device: "/dev/sda2"}, {MountPoint: "/srv/pg", Device: "/dev/loop0p1"}}}
	d := Delta{Engine: vocab.EnginePostgreSQL, Version: "15.14", Start: t0, Interval: time.Minute,
		Sets: []Set{{Location: Location{Kind: vocab.LocationWAL, Path: "/srv/pg/data/pg_wal"}, Ops: map[vocab.DatabaseOp]Counter{vocab.DBOpWALSync: timed(3, 30)}}}}
	got := Record("pg", d, NewAttributor(m, fakeFS(nil)))
	if len(got.GetSets()) != 1 || got.GetSets()[0].GetDevice() != "loop0p1" || got.GetSets()[0].GetMountPoint() != "/srv/pg" {
		t.Fatalf("sets %v: want one on /srv/pg, device loop0p1", got.GetSets())
	}
}
