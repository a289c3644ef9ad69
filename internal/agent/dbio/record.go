package dbio

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// group is the sets of one location kind on one place: one DatabaseIOSet.
type group struct {
	kind  vocab.DatabaseLocation
	place Place
	paths []string
	ops   map[vocab.DatabaseOp]Counter
}

// Record is the wire form of one interval of source: its sets placed on
// volumes by a, those of one location kind on one volume summed into one
// DatabaseIOSet (MySQL counts every file on its own: they are summed per
// volume, the set's path being their deepest common directory). A file
// outside the data directory that did nothing in the interval is left
// out, so that a volume holding only a file the server read once at start
// (a character set) is not named as holding the database.
func Record(source string, d Delta, a *Attributor) *plumblinev1.DatabaseIO {
	var groups []*group
	for _, s := range d.Sets {
		if s.Kind == vocab.LocationFile && idle(s) {
			continue // a file outside the data directory read once (a character set, a pid file): no set on its volume
		}
		p := placeSet(a, s)
		i := slices.IndexFunc(groups, func(g *group) bool { return g.kind == s.Kind && g.place == p })
		if i < 0 {
			groups = append(groups, &group{kind: s.Kind, place: p, ops: map[vocab.DatabaseOp]Counter{}})
			i = len(groups) - 1
		}
		g := groups[i]
		g.paths = append(g.paths, s.Path)
		for op, c := range s.Ops {
			if acc, ok := g.ops[op]; ok {
				c = sum(acc, c)
			}
			g.ops[op] = c
		}
	}
	rec := &plumblinev1.DatabaseIO{
		Source:    source,
		Engine:    string(d.Engine),
		Version:   d.Version,
		StartedAt: timestamppb.New(d.Start),
		Interval:  durationpb.New(d.Interval),
	}
	locOrder := vocab.DatabaseLocations()
	slices.SortStableFunc(groups, func(x, y *group) int {
		return cmp.Or(cmp.Compare(slices.Index(locOrder, x.kind), slices.Index(locOrder, y.kind)),
			cmp.Compare(x.place.MountPoint, y.place.MountPoint), cmp.Compare(x.place.Why, y.place.Why))
	})
	for _, g := range groups {
		rec.Sets = append(rec.Sets, g.wire())
	}
	for _, u := range d.Unknown {
		rec.Unknown = append(rec.Unknown, &plumblinev1.Unknown{Field: u.Field, Reason: u.Reason})
	}
	return rec
}

// idle says whether no operation of s happened in the interval.
func idle(s Set) bool {
	for _, c := range s.Ops {
		if c.Count > 0 {
			return false
		}
	}
	return true
}

// placeSet places a set: its path, and every other directory its counters
// include on the same volume, or why not.
func placeSet(a *Attributor, s Set) Place {
	p := a.Place(s.Path, s.File)
	if p.MountPoint == "" {
		return p
	}
	var elsewhere []string
	for _, o := range s.Also {
		op := a.Place(o, false)
		if op != p {
			where := op.MountPoint
			if where == "" {
				where = "an unknown volume: " + op.Why
			}
			elsewhere = append(elsewhere, fmt.Sprintf("%s on %s", o, where))
		}
	}
	if len(elsewhere) > 0 {
		return Place{Why: fmt.Sprintf("the counters include tablespaces on other volumes than %s's %s (%s); the database does not count I/O per tablespace",
			s.Path, p.MountPoint, strings.Join(elsewhere, ", "))}
	}
	return p
}

// sum adds c to acc; the time only while every counter summed was timed.
func sum(acc, c Counter) Counter {
	acc.Count += c.Count
	acc.Bytes += c.Bytes
	switch {
	case acc.Timed && c.Timed:
		acc.TimeNS += c.TimeNS
	case acc.Timed:
		acc.Timed, acc.TimeNS, acc.NotMeasured = false, 0, c.NotMeasured
	}
	return acc
}

func (g *group) wire() *plumblinev1.DatabaseIOSet {
	set := &plumblinev1.DatabaseIOSet{
		Location:    string(g.kind),
		Path:        cmp.Or(commonDir(g.paths), "(unknown)"),
		MountPoint:  g.place.MountPoint,
		Device:      kernelName(g.place.Device),
		Attribution: g.place.Why,
	}
	for _, op := range vocab.DatabaseOps() {
		c, ok := g.ops[op]
		if !ok {
			continue
		}
		w := &plumblinev1.DatabaseIOOp{Op: string(op), Count: c.Count, Bytes: c.Bytes}
		switch {
		case c.Timed && c.Count == 0 && c.TimeNS > 0:
			// PostgreSQL before 16 counts writes and their time in two
			// views that are updated apart: time without operations
			// is no latency.
			w.NotMeasured = "time counted without operations in this interval (the database updated its views apart)"
		case c.Timed:
			w.TimeNanoseconds = &c.TimeNS
		default:
			w.NotMeasured = cmp.Or(c.NotMeasured, "the database does not time it")
		}
		set.Ops = append(set.Ops, w)
	}
	return set
}

// commonDir is the one path, or the deepest directory holding them all.
func commonDir(paths []string) string {
	if len(paths) == 1 {
		return paths[0]
	}
	dir := filepath.Dir(paths[0])
	for _, p := range paths[1:] {
		for dir != filepath.Dir(dir) && dir != p && !strings.HasPrefix(p, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator)) {
			dir = filepath.Dir(dir)
		}
	}
	return dir
}

// kernelName is the device as the wire names it — the kernel's name, like
// a probe run's device (the mount table's /dev/loop0p1 is loop0p1) — or
// "" when there is none.
func kernelName(dev string) string {
	if dev == "" {
		return ""
	}
	return filepath.Base(dev)
}
