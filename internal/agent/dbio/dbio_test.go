package dbio

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

var t0 = time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)

func timed(count, ns uint64) Counter { return Counter{Count: count, TimeNS: ns, Timed: true} }

func pgSample(at time.Duration, reads, readNS uint64, timedOn bool) Sample {
	c := timed(reads, readNS)
	if !timedOn {
		c = Counter{Count: reads, NotMeasured: "track_io_timing is off"}
	}
	return Sample{Engine: vocab.EnginePostgreSQL, Version: "15.18", At: t0.Add(at), Started: t0.Add(-time.Hour), Epoch: "e1",
		Sets: []Set{{Location: Location{Kind: vocab.LocationData, Path: "/pg"}, Ops: map[vocab.DatabaseOp]Counter{vocab.DBOpRead: c}}}}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	file := func(path string, reads uint64, fromZero bool) Set {
		return Set{Location: Location{Kind: vocab.LocationData, Path: path}, File: true, FromZero: fromZero,
			Ops: map[vocab.DatabaseOp]Counter{vocab.DBOpRead: timed(reads, reads*1000)}}
	}
	for _, tc := range []struct {
		name       string
		prev, cur  Sample
		want       []Set // nil with wantErr
		backwards  bool
		wantErrSub string
	}{
		{name: "delta", prev: pgSample(0, 100, 5000, true), cur: pgSample(time.Minute, 160, 9000, true),
			want: []Set{{Location: Location{Kind: vocab.LocationData, Path: "/pg"}, Ops: map[vocab.DatabaseOp]Counter{vocab.DBOpRead: timed(60, 4000)}}}},
		{name: "timing off at the end: not measured", prev: pgSample(0, 100, 5000, true), cur: pgSample(time.Minute, 160, 0, false),
			want: []Set{{Location: Location{Kind: vocab.LocationData, Path: "/pg"}, Ops: map[vocab.DatabaseOp]Counter{vocab.DBOpRead: {Count: 60, NotMeasured: "track_io_timing is off"}}}}},
		{name: "timing switched on within: not measured", prev: pgSample(0, 100, 0, false), cur: pgSample(time.Minute, 160, 9000, true),
			want: []Set{{Location: Location{Kind: vocab.LocationData, Path: "/pg"}, Ops: map[vocab.DatabaseOp]Counter{vocab.DBOpRead: {Count: 60, NotMeasured: "timing was switched on during the interval: track_io_timing is off"}}}}},
		{name: "count backwards", prev: pgSample(0, 100, 5000, true), cur: pgSample(time.Minute, 99, 9000, true), backwards: true},
		{name: "time backwards", prev: pgSample(0, 100, 5000, true), cur: pgSample(time.Minute, 100, 4000, true), backwards: true},
		{name: "reset: epoch moved", prev: pgSample(0, 100, 5000, true), cur: func() Sample { s := pgSample(time.Minute, 500, 9000, true); s.Epoch = "e2"; return s }(), backwards: true},
		{name: "restart", prev: pgSample(0, 100, 5000, true), cur: func() Sample { s := pgSample(time.Minute, 500, 9000, true); s.Started = t0; return s }(), backwards: true},
		{name: "not later", prev: pgSample(time.Minute, 100, 5000, true), cur: pgSample(time.Minute, 100, 5000, true), wantErrSub: "want the second later"},
		{name: "mysql: a new file counts from zero, a gone file is gone, a re-created file restarts",
			prev: Sample{At: t0, Sets: []Set{file("/my/a.ibd", 10, true), file("/my/gone.ibd", 5, true), file("/my/t.ibd", 900, true)}},
			cur:  Sample{At: t0.Add(time.Minute), Sets: []Set{file("/my/a.ibd", 15, true), file("/my/new.ibd", 7, true), file("/my/t.ibd", 40, true)}},
			want: []Set{file("/my/a.ibd", 5, false), file("/my/new.ibd", 7, false), file("/my/t.ibd", 40, false)}},
		{name: "mysql: after a truncated sample a file new to the list waits",
			prev: Sample{At: t0, Truncated: true, Sets: []Set{file("/my/a.ibd", 10, true)}},
			cur:  Sample{At: t0.Add(time.Minute), Sets: []Set{file("/my/a.ibd", 15, true), file("/my/b.ibd", 70000, true)}},
			want: []Set{file("/my/a.ibd", 5, false)}},
		{name: "a new location without FromZero waits", prev: pgSample(0, 100, 5000, true),
			cur: func() Sample {
				s := pgSample(time.Minute, 100, 5000, true)
				s.Sets = append(s.Sets, Set{Location: Location{Kind: vocab.LocationWAL, Path: "/pg/pg_wal"}, Ops: map[vocab.DatabaseOp]Counter{vocab.DBOpWALSync: timed(3, 3)}})
				return s
			}(),
			want: []Set{{Location: Location{Kind: vocab.LocationData, Path: "/pg"}, Ops: map[vocab.DatabaseOp]Counter{vocab.DBOpRead: timed(0, 0)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Diff(tc.prev, tc.cur)
			switch {
			case tc.backwards:
				if !errors.Is(err, ErrBackwards) {
					t.Fatalf("Diff = %v, %v; want ErrBackwards", d, err)
				}
				return
			case tc.wantErrSub != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
					t.Fatalf("Diff error %v, want %q", err, tc.wantErrSub)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			for i := range d.Sets {
				d.Sets[i].FromZero = false
			}
			for i := range tc.want {
				tc.want[i].FromZero = false
			}
			if diff := cmp.Diff(tc.want, d.Sets); diff != "" {
				t.Errorf("Diff sets (-want +got):\n%s", diff)
			}
			if d.Interval != tc.cur.At.Sub(tc.prev.At) || !d.Start.Equal(tc.prev.At) {
				t.Errorf("interval %v from %v, want %v from %v", d.Interval, d.Start, tc.cur.At.Sub(tc.prev.At), tc.prev.At)
			}
		})
	}
}

// fakeFS resolves paths through a table of symlinks (a prefix and its
// target); a path under "/missing" does not exist, under "/secret" may not
// be looked up.
func fakeFS(links map[string]string) Resolver {
	return func(p string) (string, error) {
		switch {
		case strings.HasPrefix(p, "/missing"):
			return "", &fs.PathError{Op: "lstat", Path: p, Err: fs.ErrNotExist}
		case strings.HasPrefix(p, "/secret"):
			return "", &fs.PathError{Op: "lstat", Path: p, Err: fs.ErrPermission}
		}
		for from, to := range links {
			if p == from || strings.HasPrefix(p, from+"/") {
				return to + strings.TrimPrefix(p, from), nil
			}
		}
		return p, nil
	}
}

func TestAttributorPlace(t *testing.T) {
	t.Parallel()
	m := Mounts{
		Volumes: []*plumblinev1.Volume{{MountPoint: "/", Device: "sda2"}, {MountPoint: "/srv/pg", Device: "md0"}, {MountPoint: "/wal", Device: "dm-3"}},
		Filtered: []geometry.Filtered{
			{MountPoint: "/tmp", FSType: "tmpfs", Source: "tmpfs", Reason: geometry.FilterInMemory},
			{MountPoint: "/srv/pgbind", FSType: "xfs", Source: "/dev/mapper/vg-wal", Reason: geometry.FilterDuplicate},
			{MountPoint: "/nfs", FSType: "nfs4", Source: "filer:/vol", Reason: geometry.FilterNoBlockDevice},
		},
	}
	a := NewAttributor(m, fakeFS(map[string]string{"/srv/pg/15/main/pg_wal": "/wal/pg_wal", "/dev/mapper/vg-wal": "/dev/dm-3"}))
	for _, tc := range []struct {
		path   string
		isFile bool
		mount  string
		device string
		whySub string
	}{
		{path: "/srv/pg/15/main", mount: "/srv/pg", device: "md0"},
		{path: "/srv/pg", mount: "/srv/pg", device: "md0"},
		{path: "/srv/pgdata", mount: "/", device: "sda2"}, // a prefix of the name is not a parent directory
		{path: "/srv/pg/15/main/pg_wal", mount: "/wal", device: "dm-3"},
		{path: "/srv/pgbind/x", mount: "/wal", device: "dm-3"}, // a bind mount of the /wal volume's device
		{path: "/srv/pg/15/main/pg_wal/000000010000000000000001", isFile: true, mount: "/wal", device: "dm-3"},
		{path: "/tmp/pgsql_tmp", whySub: "on /tmp (tmpfs tmpfs), which is not a volume: an in-memory file system"},
		{path: "/nfs/db", whySub: "no local block device"},
		{path: "/missing/data", whySub: "not on this host's file system"},
		{path: "/secret/data", whySub: "permission denied"},
		{path: "", whySub: "did not say where"},
	} {
		p := a.Place(tc.path, tc.isFile)
		if p.MountPoint != tc.mount || p.Device != tc.device || (tc.whySub == "") != (p.Why == "") || !strings.Contains(p.Why, tc.whySub) {
			t.Errorf("Place(%q) = %+v, want %s %s, why containing %q", tc.path, p, tc.mount, tc.device, tc.whySub)
		}
	}
	if p := NewAttributor(Mounts{}, fakeFS(nil)).Place("/srv/pg", false); p.Why == "" {
		t.Errorf("Place with no discovery = %+v, want a reason", p)
	}
}

// TestAttributorRealSymlinks places a WAL directory that is a real symlink
// to another "volume" (a directory the mount table names).
func TestAttributorRealSymlinks(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, d := range []string{"data", "walvol/pg_wal"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "walvol", "pg_wal"), filepath.Join(root, "data", "pg_wal")); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	real, err := filepath.EvalSymlinks(root) // the temp dir may itself be under a link
	if err != nil {
		t.Fatal(err)
	}
	m := Mounts{Volumes: []*plumblinev1.Volume{{MountPoint: real, Device: "data0"}, {MountPoint: filepath.Join(real, "walvol"), Device: "wal0"}}}
	a := NewAttributor(m, nil)
	if p := a.Place(filepath.Join(root, "data", "pg_wal"), false); p.Device != "wal0" {
		t.Errorf("pg_wal placed %+v, want the volume its link points to (wal0)", p)
	}
	if p := a.Place(filepath.Join(root, "data"), false); p.Device != "data0" {
		t.Errorf("data placed %+v, want data0", p)
	}
}

func TestRecord(t *testing.T) {
	t.Parallel()
	m := Mounts{Volumes: []*plumblinev1.Volume{{MountPoint: "/", Device: "sda2"}, {MountPoint: "/srv/my", Device: "md0"}, {MountPoint: "/ts", Device: "sdc"}}}
	a := NewAttributor(m, fakeFS(nil))
	file := func(kind vocab.DatabaseLocation, path string, op vocab.DatabaseOp, c Counter) Set {
		return Set{Location: Location{Kind: kind, Path: path}, File: true, Ops: map[vocab.DatabaseOp]Counter{op: c}}
	}
	d := Delta{Engine: vocab.EngineMySQL, Version: "8.0.40", Start: t0, Interval: time.Minute,
		Sets: []Set{
			file(vocab.LocationData, "/srv/my/data/shop/orders.ibd", vocab.DBOpRead, timed(10, 1000)),
			file(vocab.LocationData, "/srv/my/data/ibdata1", vocab.DBOpRead, timed(5, 500)),
			file(vocab.LocationData, "/srv/my/data/shop/items.ibd", vocab.DBOpRead, Counter{Count: 1, NotMeasured: "wait/io/file/x is not timed"}),
			file(vocab.LocationWAL, "/srv/my/data/binlog.000001", vocab.DBOpWALWrite, timed(3, 30)),
			file(vocab.LocationFile, "/usr/share/mysql/charsets/Index.xml", vocab.DBOpRead, timed(0, 0)),
			{Location: Location{Kind: vocab.LocationData}, Ops: map[vocab.DatabaseOp]Counter{vocab.DBOpWrite: timed(0, 7)}},
			{Location: Location{Kind: vocab.LocationData, Path: "/srv/my/pgdata"}, Also: []string{"/ts/one"}, Ops: map[vocab.DatabaseOp]Counter{vocab.DBOpWrite: timed(1, 1)}},
		},
		Unknown: []Unknown{{Field: "innodb_log_file", Reason: "not instrumented"}},
	}
	ns := func(v uint64) *uint64 { return &v }
	want := &plumblinev1.DatabaseIO{Source: "shop", Engine: "mysql", Version: "8.0.40", Interval: durationOf(time.Minute), StartedAt: timeOf(t0),
		Sets: []*plumblinev1.DatabaseIOSet{
			{Location: "data", Path: "/srv/my/pgdata", Attribution: "the counters include tablespaces on other volumes than /srv/my/pgdata's /srv/my (/ts/one on /ts); the database does not count I/O per tablespace",
				Ops: []*plumblinev1.DatabaseIOOp{{Op: "write", Count: 1, TimeNanoseconds: ns(1)}}},
			{Location: "data", Path: "(unknown)", Attribution: "the database did not say where these files are",
				Ops: []*plumblinev1.DatabaseIOOp{{Op: "write", NotMeasured: "time counted without operations in this interval (the database updated its views apart)"}}},
			{Location: "data", Path: "/srv/my/data", MountPoint: "/srv/my", Device: "md0", Ops: []*plumblinev1.DatabaseIOOp{{Op: "read", Count: 16, NotMeasured: "wait/io/file/x is not timed"}}},
			{Location: "wal", Path: "/srv/my/data/binlog.000001", MountPoint: "/srv/my", Device: "md0", Ops: []*plumblinev1.DatabaseIOOp{{Op: "wal-write", Count: 3, TimeNanoseconds: ns(30)}}},
		},
		Unknown: []*plumblinev1.Unknown{{Field: "innodb_log_file", Reason: "not instrumented"}},
	}
	got := Record("shop", d, a)
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Record (-want +got):\n%s", diff)
	}
}

func durationOf(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

func timeOf(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

// TestResolveUnder follows links inside a database's root: an absolute
// target starts again at the root, a relative one at the link's
// directory, and ".." stops at the root.
func TestResolveUnder(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, d := range []string{"srv/pg/data", "walvol/pg_wal", "ts/one"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, at string) {
		if err := os.Symlink(target, filepath.Join(root, at)); err != nil {
			t.Skipf("no symlinks here: %v", err)
		}
	}
	link("/walvol/pg_wal", "srv/pg/data/pg_wal")  // absolute: inside the root
	link("../../../ts/one", "srv/pg/data/tblspc") // relative
	link("/loop", "loop")
	hostRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"/srv/pg/data", "srv/pg/data"},
		{"/srv/pg/data/pg_wal", "walvol/pg_wal"},
		{"/srv/pg/data/tblspc", "ts/one"},
		{"/../../srv/pg/data", "srv/pg/data"},
	} {
		got, err := ResolveUnder(root, tc.in)
		if want := filepath.Join(hostRoot, tc.want); err != nil || got != want {
			t.Errorf("ResolveUnder(%q) = %q, %v; want %q", tc.in, got, err, want)
		}
	}
	if _, err := ResolveUnder(root, "/srv/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ResolveUnder(missing) error %v, want ErrNotExist", err)
	}
	if _, err := ResolveUnder(root, "/loop/x"); err == nil || !strings.Contains(err.Error(), "too many symlinks") {
		t.Errorf("ResolveUnder(a link loop) error %v, want too many symlinks", err)
	}
	m := Mounts{Volumes: []*plumblinev1.Volume{{MountPoint: "/", Device: "sda"}, {MountPoint: filepath.Join(hostRoot, "walvol"), Device: "wal0"}}}
	if p := NewAttributor(m, nil).WithRoot(root).Place("/srv/pg/data/pg_wal", false); p.Device != "wal0" {
		t.Errorf("pg_wal in a chroot placed %+v, want wal0", p)
	}
	if p := NewAttributor(m, nil).WithRoot(root).Place("/nowhere", false); !strings.Contains(p.Why, "not under the database's root") {
		t.Errorf("a missing path in a chroot placed %+v, want why", p)
	}
}

// FuzzResolveUnder: whatever path a database states (it is outside input),
// ResolveUnder's answer stays under the database's root, and Place never
// panics.
func FuzzResolveUnder(f *testing.F) {
	root := f.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "a", "b"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink("../../..", filepath.Join(root, "a", "b", "up")); err != nil {
		f.Skipf("no symlinks here: %v", err)
	}
	os.Symlink("/a", filepath.Join(root, "abs"))
	hostRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"/a/b", "/a/b/up/up/etc", "../../..", "/abs/b/up", "", "a//b/./..", "/a/b/up/../../x"} {
		f.Add(s)
	}
	m := Mounts{Volumes: []*plumblinev1.Volume{{MountPoint: "/", Device: "sda"}}}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := ResolveUnder(root, p)
		if err == nil && got != hostRoot && !strings.HasPrefix(got, hostRoot+string(filepath.Separator)) {
			t.Fatalf("ResolveUnder(%q) = %q: outside the root %s", p, got, hostRoot)
		}
		NewAttributor(m, nil).WithRoot(root).Place(p, len(p)%2 == 0)
	})
}

// Windows paths (as PostgreSQL and MySQL on Windows state them) fall on
// the volume mounted at their drive letter or folder, whatever the case
// and slash direction.
func TestPlaceWindowsPaths(t *testing.T) {
	t.Parallel()
	m := Mounts{Volumes: []*plumblinev1.Volume{{MountPoint: "C:/", Device: "PhysicalDrive0"}, {MountPoint: "D:/SQL/", Device: "PhysicalDrive2"}}}
	a := NewAttributor(m, func(p string) (string, error) { return p, nil })
	for _, tc := range []struct{ path, want string }{
		{`C:\Program Files\PostgreSQL\16\data`, "C:/"},
		{`d:\sql\data\ibdata1`, "D:/SQL/"},
		{`D:/SQLDATA/x`, ""},
	} {
		if p := a.Place(tc.path, false); p.MountPoint != tc.want {
			t.Errorf("Place(%q) = %+v, want %q", tc.path, p, tc.want)
		}
	}
}
