package membernoise

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/members"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// labSample is a line of the slow-member bench's recordings
// (bench/slow-member -record): one member's deltas over one interval of a
// lab array, with the fault it had then.
type labSample struct {
	At       time.Time     `json:"at"` // end of the interval
	Interval time.Duration `json:"interval_ns"`
	Array    int           `json:"array"`
	Device   string        `json:"device"`
	Fault    string        `json:"fault"`
	Reads    uint64        `json:"reads"`
	ReadMS   uint64        `json:"read_time_ms"`
	Writes   uint64        `json:"writes"`
	WriteMS  uint64        `json:"write_time_ms"`
	ReadSec  uint64        `json:"read_sectors"`
	WriteSec uint64        `json:"write_sectors"`
	IOMS     uint64        `json:"io_time_ms"`
}

// labInterval is one interval of a recorded lab array.
type labInterval struct {
	end, start time.Time
	g          store.MemberGroup
	faulty     string // the member with a fault, "" none
}

func readLab(t *testing.T, path string) map[int][]labInterval {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	arrays := map[int][]labInterval{}
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		var s labSample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ivs := arrays[s.Array]
		if n := len(ivs); n == 0 || !ivs[n-1].end.Equal(s.At) {
			ivs = append(ivs, labInterval{end: s.At, start: s.At.Add(-s.Interval), g: store.MemberGroup{Device: "array", Kind: string(vocab.MemberGroupMD)}})
		}
		iv := &ivs[len(ivs)-1]
		iv.g.Members = append(iv.g.Members, store.MemberCounters{Device: s.Device, State: []string{vocab.MDInSync},
			Reads: s.Reads, ReadTimeMS: s.ReadMS, Writes: s.Writes, WriteTimeMS: s.WriteMS, ReadSectors: s.ReadSec, WriteSectors: s.WriteSec, IOTimeMS: s.IOMS})
		if s.Fault != "" {
			iv.faulty = s.Device
		}
		arrays[s.Array] = ivs
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return arrays
}

// The slow-member bench's recorded lab runs (members slowed ×2–×5 or
// stalling 3% of their ops, as their loop devices' own /proc/diskstats
// counted them, and healthy control arrays), replayed interval by interval
// through today's judge: every faulted member named, no other, within 15
// minutes of its fault; no control's member named.
func TestLabTrials(t *testing.T) {
	t.Parallel()
	paths, _ := filepath.Glob("../../../bench/slow-member/testdata/run*-members.jsonl.gz")
	if len(paths) == 0 {
		t.Skip("no recorded lab runs in bench/slow-member/testdata")
	}
	cfg := members.DefaultConfig()
	var trials int
	var took []time.Duration
	for _, p := range paths {
		arrays := readLab(t, p)
		for _, a := range slices.Sorted(maps.Keys(arrays)) {
			states := map[string]*store.MemberState{}
			var faultAt time.Time
			var faulty string
			named := time.Duration(-1)
			for _, iv := range arrays[a] {
				if iv.faulty != "" && faultAt.IsZero() {
					faultAt, faulty = iv.start, iv.faulty
				}
				for _, v := range members.JudgeGroup(cfg, iv.end.Sub(iv.start), iv.g) {
					st := states[v.Device]
					if st == nil {
						st = &store.MemberState{}
						states[v.Device] = st
					}
					if !members.Observe(cfg, st, v, iv.start, iv.end) || !st.Slow {
						continue
					}
					if faultAt.IsZero() || v.Device != faulty {
						t.Errorf("%s array %d: %s named at %s (fault on %q from %s)", filepath.Base(p), a, v.Device, iv.end, faulty, faultAt)
					} else if named < 0 {
						named = iv.end.Sub(faultAt)
					}
				}
			}
			if faultAt.IsZero() {
				continue
			}
			trials++
			took = append(took, named)
			switch {
			case named < 0:
				t.Errorf("%s array %d: the faulted member %s never named", filepath.Base(p), a, faulty)
			case named > 15*time.Minute:
				t.Errorf("%s array %d: %s named %s after its fault, want within 15m", filepath.Base(p), a, faulty, named)
			}
		}
	}
	slices.Sort(took)
	t.Logf("lab trials=%d, named after: %v", trials, took)
}
