package align

import (
	"strings"
	"testing"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Layer offsets whose sum wraps past 2^64 (issue 11: 2^63 + 2^63 read as
// 0, "aligned") are not a known offset: the verdict is unknown and says
// why.
func TestOffsetSumOverflowIsUnknown(t *testing.T) {
	t.Parallel()
	v := volume("xfs", 4096,
		fsLayer("xfs", 4096, 0, 0),
		&plumblinev1.Layer{Kind: "lvm", Device: "dm-0", OffsetBytes: u64(1 << 63), Source: "sysfs"},
		partition("sdb1", 1<<63, 512),
		declaredRAID("sdb", "raid10", 64<<10, 4, 2))
	a := Evaluate(v)
	if a.GetVerdict() != "unknown" || a.DataOffsetBytes != nil {
		t.Fatalf("Evaluate = verdict %q, data offset %v; want unknown and no offset", a.GetVerdict(), a.DataOffsetBytes)
	}
	found := false
	for _, f := range a.GetFindings() {
		if f.GetRule() == RuleOffsetUnknown && strings.Contains(f.GetMessage(), "more than 2^64-1 bytes") {
			found = true
		}
	}
	if !found {
		t.Fatalf("findings %v: want %s saying the offsets overflow", a.GetFindings(), RuleOffsetUnknown)
	}
}
