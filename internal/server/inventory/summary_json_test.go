package inventory

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/plumbline/plumbline/internal/vocab"
)

// A top offender's JSON has the API's members in the API's order, one
// split_fraction_<key> per I/O size between stripe_unit_bytes and
// severity; an unknown split fraction is null.
func TestTopOffenderJSON(t *testing.T) {
	t.Parallel()
	off, stripe := int64(32256), int64(64<<10)
	split := 0.0625
	o := TopOffender{ID: "abc", Host: "db1", MountPoint: "/data", Verdict: "misaligned", Profile: "p",
		DataOffsetBytes: &off, StripeUnitBytes: &stripe, Severity: "critical", Rule: "r", Remediation: "fix <it>"}
	o.SplitFraction[0] = &split
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.Token() // {
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"id", "host", "mount_point", "verdict", "profile", "data_offset_bytes", "stripe_unit_bytes"}
	for _, s := range vocab.IOSizes() {
		want = append(want, "split_fraction_"+vocab.IOSizeKey(s))
	}
	want = append(want, "severity", "rule", "remediation")
	if !slices.Equal(keys, want) {
		t.Errorf("TopOffender JSON members %v, want %v", keys, want)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for i, s := range vocab.IOSizes() {
		k := "split_fraction_" + vocab.IOSizeKey(s)
		switch v := m[k]; {
		case i == 0 && v != split:
			t.Errorf("%s = %v, want %v", k, v, split)
		case i > 0 && v != nil:
			t.Errorf("%s = %v, want null (unknown)", k, v)
		}
	}
	if m["remediation"] != "fix <it>" || m["data_offset_bytes"] != float64(off) {
		t.Errorf("TopOffender JSON %s: remediation or data_offset_bytes lost", b)
	}
	// The same bytes encoding/json writes for a struct naming the members
	// (as TopOffender did before its split fractions became an array).
	if vocab.NumIOSizes == 2 {
		legacy, err := json.Marshal(struct {
			ID              string   `json:"id"`
			Host            string   `json:"host"`
			MountPoint      string   `json:"mount_point"`
			Verdict         string   `json:"verdict"`
			Profile         string   `json:"profile"`
			DataOffsetBytes *int64   `json:"data_offset_bytes"`
			StripeUnitBytes *int64   `json:"stripe_unit_bytes"`
			SplitFraction8K float64  `json:"split_fraction_8k"`
			SplitFraction64 *float64 `json:"split_fraction_64k"`
			Severity        string   `json:"severity"`
			Rule            string   `json:"rule"`
			Remediation     string   `json:"remediation"`
		}{"abc", "db1", "/data", "misaligned", "p", &off, &stripe, split, nil, "critical", "r", "fix <it>"})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, legacy) {
			t.Errorf("TopOffender JSON\n%s\nwant\n%s", b, legacy)
		}
	}
}
